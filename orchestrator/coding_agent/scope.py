r"""Keep Claude Code's file writes inside the project: path-scoped permission rules for one turn.

Facts observed with Claude Code 2.1.330 in `-p` mode (tests/coding_agent/test_claude_code_scope_cli.py):
- A bare tool name in `--allowedTools` ("Write", "Edit", "Bash") allows every use of the tool, so
  the old default let a ticket write `../outside.py`.
- Path rules on `Write(...)` are accepted but never consulted; `Edit(<path>)` rules govern every
  file-editing tool (Write and Edit alike).
- `Edit(//abs/dir/**)` is an absolute path; a single leading "/" would be relative to a settings
  file, which a command-line rule does not have. Paths are glob patterns: `*`, `[`, `]`, `!` and
  `#` in a directory name must be escaped with a backslash (else `*` matches other directories
  and `[x]` not the directory itself); `?` and `\` cannot be matched exactly in any spelling tried
  (`\?`, `[?]`, `[\\]`), so such a directory cannot be scoped.
- A write that no rule allows is refused without asking: the model gets an error tool_result
  ("Claude requested permissions to write to ..., but you haven't granted it yet") and the result
  line lists it under `permission_denials`; the turn itself goes on.
- `acceptEdits` alone accepts edits inside the working directories (cwd and `--add-dir`), and
  runs simple file commands (ls, mkdir, rm, `echo > file`) in them, refusing those that touch
  other paths; any other command (python, pytest, sh -c) needs an allow rule. The explicit Edit
  rules below make the project writable whatever the permission mode (`default`, `dontAsk`).
- `bypassPermissions` ignores allow rules altogether, and `auto` lets a model-based check approve
  what no rule covers, so neither can keep writes inside the project.
- Rules only add up: an allow rule from the user's own settings (`~/.claude/settings.json`, or
  CLAUDE_CONFIG_DIR) still applies. `--restricted` (via extra_args) confines the file tools to the
  working directories even then, but also drops Bash and ignores all settings files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from ..errors import CodingAgentError
from .base import OPTIONS_TABLE

# Claude Code's tools that change files; one Edit(<path>) rule covers them all (see above).
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# Allow rules that let any shell command run, and with it `echo hi > ../anywhere`.
ANY_COMMAND = frozenset({"Bash", "Bash(*)", "Bash(**)"})
# Permission modes that do not stop at the allow rules.
UNSCOPED_MODES = frozenset({"bypassPermissions", "auto"})

_GLOB_SPECIAL = re.compile(r"([*\[\]!#])")
UNMATCHABLE = ("?", "\\")  # no rule spelling matches these characters exactly (see above)


def unmatchable(directory: Path) -> str | None:
    """The character that keeps a rule from naming `directory` exactly, or None."""
    return next((c for c in UNMATCHABLE if c in Path(directory).as_posix()), None)


def edit_rule(directory: Path) -> str:
    """`Edit(//abs/dir/**)`: every file-editing tool may write anywhere under `directory`."""
    if unmatchable(directory):
        raise ValueError(f"no permission rule can name {directory} exactly (it has {unmatchable(directory)!r})")
    escaped = _GLOB_SPECIAL.sub(r"\\\1", Path(directory).as_posix())
    return f"Edit(/{escaped}/**)"


def extra_dirs(cwd: Path, additional_dirs: Iterable[str]) -> list[Path]:
    """`additional_dirs` as absolute paths (`~` expanded, relative ones taken from the project)."""
    base = Path(os.path.abspath(cwd))
    return [Path(os.path.abspath(base / os.path.expanduser(d))) for d in additional_dirs]


def writable_dirs(cwd: Path, additional_dirs: Iterable[str]) -> list[Path]:
    """The project and the extra directories, absolute.

    Both the path as given and its symlink-free form are listed when they differ: Claude Code may
    see either (its own cwd is the real path, a model may write through the link).
    """
    out: list[Path] = []
    for d in [Path(os.path.abspath(cwd))] + extra_dirs(cwd, additional_dirs):
        for form in (d, d.resolve()):
            if form not in out:
                out.append(form)
    return out


def check_dirs(cwd: Path, additional_dirs: Iterable[str], *, scoped: bool, table: str = OPTIONS_TABLE) -> None:
    """CodingAgentError, before launch, for an extra directory that is missing or one no rule can
    name (`table`: where the options are set)."""
    additional_dirs = list(additional_dirs)
    missing = [d for d in extra_dirs(cwd, additional_dirs) if not d.is_dir()]
    if missing:
        raise CodingAgentError(
            f"The additional directory {missing[0]} does not exist, so Claude Code cannot "
            f"be given access to it. Create it or remove it from `{table} additional_dirs`."
        )
    odd = [d for d in writable_dirs(cwd, additional_dirs) if unmatchable(d)] if scoped else []
    if odd:
        raise CodingAgentError(
            f"Claude Code's permission rules cannot name {odd[0]} exactly (it contains "
            f"{unmatchable(odd[0])!r}), so its writes cannot be limited to it. Rename the "
            f"directory, or set `{table} scope_to_project = false`."
        )


def scoped_tools(allowed_tools: Iterable[str], dirs: Iterable[Path]) -> list[str]:
    """The allow rules to pass: the configured tools, with bare file-editing tools replaced by one
    Edit rule per writable directory. Rules the user scoped themselves are kept as written."""
    tools = list(allowed_tools)
    rules = [t for t in tools if t not in EDIT_TOOLS]
    if len(rules) < len(tools):
        rules += [edit_rule(d) for d in dirs]
    return list(dict.fromkeys(rules))  # drop duplicates, keep order


OPT_OUT = "or set scope_to_project = false to let Claude Code write outside the project"


def unscoped_command(allowed_tools: Iterable[str]) -> str | None:
    """Why these allow rules let a shell command write anywhere, or None."""
    broad = [t for t in allowed_tools if t.replace(" ", "") in ANY_COMMAND]
    if not broad:
        return None
    return (
        f"{broad[0]!r} lets Claude Code run any shell command, and a command can write anywhere. "
        'List the commands it may run instead, e.g. "Bash(pytest *)" (an allowed command that '
        f"runs code can still write elsewhere: rules are not a sandbox), {OPT_OUT}"
    )


def unscoped_mode(permission_mode: str) -> str | None:
    """Why this permission mode would accept writes outside the project, or None."""
    if permission_mode not in UNSCOPED_MODES:
        return None
    return (
        f"{permission_mode!r} does not stop at permission rules, so writes outside the project "
        f'would be accepted. Use "acceptEdits" (or "default" or "dontAsk"), {OPT_OUT}'
    )
