"""How aider is started: its own Python running aider's `main()` behind middle's write guard.

aider 0.86.2 keeps an absolute path outside its git root out of its edits, but for a new file named
`../elsewhere/x` it creates the (empty) file before `git add` refuses it, and without git it writes
anywhere it is told. It has no setting that confines writes, so middle runs aider's own entry point
(what the `aider` script does: `sys.exit(main())`) with `Coder.allowed_to_edit` wrapped: an edit to
a path that resolves (symlinks followed) outside the project is refused and reported, before aider
touches anything. The same launcher moves aider's repo-map cache (`.aider.tags.cache.v4`, which it
would put at the top of the work tree) into the session's directory, and can shorten aider's retry
of temporary API errors (60 s of doubling backoff in 0.86.2).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from ..errors import CodingAgentError
from ..executables import find_executable
from .base import OPTIONS_TABLE

__all__ = ["INSTALL_HINT", "LAUNCHER", "REFUSED", "find_aider", "launcher_argv"]

INSTALL_HINT = ("Install aider in a venv of its own: python3 -m venv /opt/middle-aider && "
                "/opt/middle-aider/bin/pip install aider-chat==0.86.2 && "
                "ln -sf /opt/middle-aider/bin/aider /usr/local/bin/aider")
REFUSED = "middle refused the edit to"  # the launcher's line for a refused write (parsed in aider_output)
CANNOT_IMPORT = 127  # the launcher's exit code when its Python cannot import aider
# The second line of pip's /bin/sh launcher: '''exec' "/path/to/python" "$0" "$@"
_TRAMPOLINE_RE = re.compile(r"""^'''exec' "(?P<python>[^"]+)" "\$0" "\$@"$""")

# Run as `python -c LAUNCHER CONFIG_JSON aider-args...`; CONFIG_JSON: argv0, writable (dirs), tags_cache,
# retry_timeout_s. Kept to what aider's public names allow: main(), Coder.allowed_to_edit, RepoMap.
LAUNCHER = f"""
import json, sys
from pathlib import Path
conf = json.loads(sys.argv.pop(1))
sys.argv[0] = conf["argv0"]
try:
    from aider.main import main
    from aider.coders import base_coder
    from aider.repomap import RepoMap
except ImportError as exc:
    sys.stderr.write(f"cannot import aider with {{sys.executable}}: {{exc}}\\n")
    sys.exit({CANNOT_IMPORT})
if conf.get("tags_cache"):
    RepoMap.TAGS_CACHE_DIR = conf["tags_cache"]  # absolute: Path(root) / it is itself
if conf.get("retry_timeout_s") is not None:
    base_coder.RETRY_TIMEOUT = conf["retry_timeout_s"]
roots = [Path(d).resolve() for d in conf.get("writable") or []]
if roots:
    allowed_to_edit = base_coder.Coder.allowed_to_edit

    def confined(self, path):
        full = Path(self.abs_root_path(path)).resolve()
        if not any(full == r or r in full.parents for r in roots):
            self.io.tool_error(f"{REFUSED} {{path}}: it is outside the project ({{roots[0]}}); nothing written.")
            return False
        return allowed_to_edit(self, path)

    base_coder.Coder.allowed_to_edit = confined
sys.exit(main())
"""


def find_aider(cli_path: str | None, path: str | None, table: str = OPTIONS_TABLE) -> str:
    """The `aider` executable: `cli_path`, else `aider` on PATH; CodingAgentError with the install
    command when there is none (`table`: where `cli_path` is set)."""
    found = find_executable(cli_path, "aider", path=path)
    if cli_path and found is None:
        raise CodingAgentError(f"aider is not at {cli_path} ({table} cli_path). {INSTALL_HINT}")
    if found is None:
        raise CodingAgentError(f"aider is not installed (no `aider` on PATH). {INSTALL_HINT}")
    return found


def interpreter_of(script: str, python: str | None, path: str | None, table: str = OPTIONS_TABLE) -> str:
    """aider's Python: `python` if given, else the one its script's first line names (pip, pipx and
    uv all write the venv's interpreter there); `table`: where `python` is set."""
    if python:
        return python
    try:
        with open(script, "rb") as f:
            first, second = (f.readline(4096).decode("utf-8", "replace").strip() for _ in range(2))
    except OSError as exc:
        raise CodingAgentError(f"cannot read {script} to find aider's Python: {exc}") from exc
    words = first[2:].split() if first.startswith("#!") else []
    trampoline = _TRAMPOLINE_RE.match(second)
    if words and Path(words[0]).name == "sh" and trampoline:
        # pip's launcher when the venv's path is too long (or holds a space) for a #! line
        words = [trampoline.group(1)]
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = [shutil.which(words[1], path=path) or words[1]]
    if not words or "python" not in Path(words[0]).name:
        raise CodingAgentError(
            f"{script} does not start with a Python interpreter line, so middle cannot run aider behind "
            f"its write guard: set `{table} python` to the Python of aider's venv.")
    return words[0]


def launcher_argv(python: str, argv0: str, conf: dict[str, Any]) -> list[str]:
    """The command's start: aider's Python, the launcher and its settings (aider's own args follow)."""
    return [python, "-c", LAUNCHER, json.dumps({"argv0": argv0, **conf})]
