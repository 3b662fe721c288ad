"""What the read-only commands (`middle tickets`, `middle log`) need from the config, remembered.

Validating `middle.toml` means importing pydantic, which alone takes as long as the rest of
`middle tickets`. So the first load validates the whole config as every command does
(`load_config`, strict, every error named) and remembers the few values the read-only commands
use, keyed by everything the result depends on: the config file's path and bytes, the
environment variables the config reads, and the config code itself. Any change to one of those
validates again; a memo that cannot be read, or is not of our shape, is ignored and rewritten (it
is a cache, not state). Nothing in it is executed: it is JSON, and each value is type-checked.

This module imports no pydantic; `orchestrator.config.settings` is imported only on a miss.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping, get_args

from orchestrator.config.paths import cache_root, find_config_file, is_setting, memo_name
from orchestrator.config.source_settings import SourceSettings
from tickets.cache_file import read_json, write_json
from tickets.deps import Mode

MEMO_VERSION = 3  # 3: reconnect_s
# What the config reads from the environment besides MIDDLE_* (MEMORY_SAVE_DIR, the memory folder; `~`).
_OTHER_INPUTS = ("MEMORY_SAVE_DIR", "HOME")
# The code whose rules decide what a config means: a change to it invalidates every memo.
_CODE = ("settings.py", "env.py", "memo.py", "paths.py", "../names.py")


@dataclass(frozen=True)
class ReadConfig:
    """The resolved values `middle tickets` and `middle log` use, from a validated config."""

    source: str  # the config file
    store_target: str  # a PostgreSQL URL, or the SQLite file under state_dir
    reconnect_s: float  # [store] reconnect_s: how long a PostgreSQL store is waited for
    tickets_dir: str  # absolute
    project_path: str  # absolute
    max_ticket_chars: int
    dependencies: Mode  # [run] dependencies
    root: str  # the config's folder: relative paths start here
    tickets_kind: str  # [tickets] kind: the ticket source
    tickets_options: str  # [tickets.options] as JSON (a memo value is text or a number)
    project_id: str  # [project] id, "" when unset
    state_dir: str  # absolute
    github: str  # [github] as JSON

    def source_settings(self) -> SourceSettings:
        return SourceSettings(self.tickets_kind, json.loads(self.tickets_options), self.root, self.tickets_dir,
                              self.project_path, self.max_ticket_chars, self.project_id or None, self.state_dir,
                              json.loads(self.github))


def read_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None, *,
                check: Callable[[Any], None]) -> ReadConfig:
    """The read-only commands' config: remembered, or validated in full (and then remembered).

    `check(config)` validates what the config alone cannot: the backend's and the coding agent's options
    against the installed plugins (`orchestrator.plugins.manager.check_options`, which sits above
    configuration); only a config it accepts is remembered.

    Raises ConfigError exactly as `load_config` + `require_config_file` do, since a miss (and any
    config that is not valid, which is never remembered) goes through them.
    """
    environ = dict(os.environ if environ is None else environ)
    explicit = path or environ.get("MIDDLE_CONFIG")
    file = (Path(explicit) if explicit else find_config_file(Path.cwd())).absolute()
    try:
        content = file.read_bytes()
    except OSError:  # missing or unreadable: load_config says which, and what to do
        content = None
    memo = cache_root(environ) / "config" / memo_name(file)
    key = _key(file, content, environ) if content is not None else None
    if key is not None:
        remembered = _recall(memo, key)
        if remembered is not None:
            return remembered
    from orchestrator.config.settings import load_config, require_config_file

    config = load_config(path, environ)
    require_config_file(config)
    check(config)  # the backend's and the coding agent's options: only a valid config is remembered
    view = ReadConfig(
        source=str(config.source),
        store_target=str(config.store_target),
        reconnect_s=config.store.reconnect_s,
        tickets_dir=str(config.resolve(config.project.tickets_dir)),
        project_path=str(config.resolve(config.project.path)),
        max_ticket_chars=config.project.max_ticket_chars,
        dependencies=config.run.dependencies,
        root=str(config.root),
        tickets_kind=config.tickets.kind,
        tickets_options=json.dumps(config.tickets.options, sort_keys=True),
        project_id=config.project.id or "",
        state_dir=str(config.state_path),
        github=json.dumps(config.github.model_dump(), sort_keys=True),
    )
    if key is not None:
        write_json(memo, {"key": key, "config": asdict(view)})
    return view


def _key(file: Path, content: bytes, environ: Mapping[str, str]) -> list:
    """Everything the validated config depends on, compared whole against the memo's."""
    here = Path(__file__).parent
    code = []
    for name in _CODE:
        try:
            st = (here / name).stat()
            code.append([name, st.st_mtime_ns, st.st_size])
        except OSError:
            code.append([name, None, None])
    inputs = sorted([k, v] for k, v in environ.items() if is_setting(k) or k in _OTHER_INPUTS)
    return [MEMO_VERSION, str(file), content.decode("utf-8", "surrogateescape"), inputs, code]


def _recall(memo: Path, key: list) -> ReadConfig | None:
    entry = read_json(memo)
    try:
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        values = entry["config"]
        kinds = {"int": int, "float": float}
        types = {f.name: kinds.get(str(f.type), str) for f in fields(ReadConfig)}
        if set(values) != set(types) or not all(type(values[k]) is t for k, t in types.items()):
            return None
        if values["dependencies"] not in get_args(Mode):  # a str, but not one waiting_for knows
            return None
        return ReadConfig(**values)
    except (TypeError, KeyError, AttributeError):
        return None  # not of our shape: validate again
