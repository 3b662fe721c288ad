"""Where the config file and the per-user caches are, and which variables are settings.

The bottom of `orchestrator.config`: it imports nothing of the config package, so the loader
(`settings`), the environment overrides (`env`), the read-only commands' memo (`memo`) and the
plugin index all build on it without importing one another in a circle.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Mapping

from orchestrator.names import CONFIG_FILE

# The per-user cache folder the embedding cache uses too (backends.retrieval.cache.cache_dir).
CACHE_VARIABLE = "MIDDLE_AGENT_CACHE_DIR"
ENV_PREFIX = "MIDDLE_"
# Variables of ours that are not config keys (MIDDLE_AGENT_CACHE_DIR is the product's cache
# folder, "middle-agent" + "cache dir", not an [agent] key; MIDDLE_HOSTNAME is the name claims
# carry, tickets/claims.py; MIDDLE_KILL_AT is orchestrator.killpoints' test-only switch, named
# here as text because this module imports nothing of ours). The API token never reaches a memo.
OTHER_VARIABLES = frozenset({"MIDDLE_CONFIG", "MIDDLE_API_TOKEN", CACHE_VARIABLE, "MIDDLE_LOAD_PLUGINS",
                             "MIDDLE_HOSTNAME", "MIDDLE_TRACE_HOOKS", "MIDDLE_KILL_AT"})


def is_setting(key: str) -> bool:
    """Whether an environment variable overrides a config key (MIDDLE_<SECTION>_<KEY>)."""
    upper = key.upper()
    return upper.startswith(ENV_PREFIX) and upper not in OTHER_VARIABLES


def find_config_file(start: Path) -> Path:
    """The nearest middle.toml in `start` or a folder above it (as git finds its repository);
    `start/middle.toml` when there is none, so the error names where it was looked for.

    A separate git repository (a `.git` folder: a clone, not a worktree or submodule, whose `.git`
    is a file) nested inside another project's folder is a project of its own, as it is to git:
    a config above it counts only when its [project] path points into that repository (a config
    kept beside the repository it drives). Else `middle run` there would run the outer project's
    tickets, and `middle init` would refuse to start one."""
    nested: Path | None = None  # the first separate repository the search has left
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file() and (nested is None or _drives(candidate, nested)):
            return candidate
        if nested is None and (folder / ".git").is_dir():
            nested = folder
    return start / CONFIG_FILE


def _drives(config: Path, repository: Path) -> bool:
    """Whether the config's [project] path is `repository` or a folder inside it. A file that
    does not parse counts, so the loader names what is wrong with it."""
    import tomllib

    try:
        project = tomllib.loads(config.read_text(encoding="utf-8")).get("project", {})
        path = project.get("path", ".") if isinstance(project, dict) else "."
        target = (config.parent / os.path.expanduser(str(path))).resolve()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError):
        return True
    return target.is_relative_to(repository.resolve())


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """$MIDDLE_AGENT_CACHE_DIR, else $XDG_CACHE_HOME/middle-agent, else ~/.cache/middle-agent."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_VARIABLE):
        return Path(environ[CACHE_VARIABLE])
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "middle-agent"


def tickets_memo(folder: str | Path) -> Path:
    """Where the parsed files of a ticket folder are remembered (see tickets.source.load_tickets)."""
    return cache_root() / "tickets" / memo_name(Path(folder).resolve())


def memo_name(path: Path) -> str:
    """A memo file's name for `path`. A checksum, not a cryptographic hash (hashlib loads OpenSSL,
    a tenth of this command's start-up): two paths that share a name only evict each other's
    memo, since the memo holds its full key and is compared whole."""
    return f"{zlib.crc32(str(path).encode()):08x}.json"
