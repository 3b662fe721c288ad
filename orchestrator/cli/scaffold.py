"""`middle init`: a starter config and ticket folder in the current directory."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import ConfigError

STARTER_CONFIG = """\
# middle-agent configuration (see README.md). Secrets come from the environment only.
[agent]
# provider = "anthropic"             # or "bedrock", "vertex", "openai-compatible", "claude-code", "codex"
                                     # (a Claude subscription, no API key): see docs/providers.md
model = "claude-sonnet-5-5"
max_turns = 20
max_cost_usd = 5.0

[coding_agent]
kind = "claude-code"

[coding_agent.options]                # validated by the worker kind (see README)
permission_mode = "acceptEdits"

[memory]
save_dir = ".middle/memory"     # remove (and unset MEMORY_SAVE_DIR) to run without memory
backend = "{backend}"
num_to_retrieve = 5

[memory.options]                # validated by the chosen backend (`middle backends`)

[project]
id = "{project}"                   # the project id (names its memory): tickets without `project:` belong here
path = "."
tickets_dir = "tickets"
{base_branch_line}
# isolation = "none"            # let tickets edit this directory in place instead of a worktree

[run]
parallel = 1                    # tickets at once, each on its own branch and worktree
# max_cost_usd_total = 20.0     # a batch stops starting tickets once this much is spent
# dependencies = "complete"     # start a ticket after its depends_on are complete (default: merged)
{check_section}"""

STARTER_TICKET = """\
---
title: Add a hello module
---
Create `hello.py` with:
```python
def hello(name: str) -> str:
    return f"Hello, {name}!"
```
"""


def project_id(root: Path) -> str:
    """The starter config's [project] id: the folder's name, made a safe id (so every ticket
    written by hand, without `project:`, belongs to it)."""
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "-" for c in root.name)
    return safe.lstrip(".") or "project"


def _base_branch_line(root: Path) -> str:
    """`base_branch = "<the branch checked out now>"` when root is in a git repository."""
    from orchestrator.workspace.git import current_branch, git

    try:
        inside = git(root, "rev-parse", "--is-inside-work-tree", check=False).returncode == 0
        branch = current_branch(root) if inside else None
    except Exception:  # no git installed: tickets will say so when they run
        branch = None
    if branch:
        return f'base_branch = "{branch}"           # tickets branch from here and merge back into it'
    return ('# base_branch = "main"          # tickets branch from here and merge back into it '
            "(default: the branch checked out)")


def git_note(root: Path) -> str | None:
    """What `middle init` says when the project cannot run tickets on branches yet: not a git
    repository, or one with no commit (each ticket branches from a commit)."""
    from orchestrator.workspace.git import git

    try:
        if git(root, "rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
            return (f"{root} is not a git repository: each ticket runs on a branch of its own, so run "
                    "`git init && git add -A && git commit -m \"first commit\"` before `middle run` (or set "
                    "[project] isolation = \"none\" to let tickets edit the folder in place)")
        if git(root, "rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode != 0:
            return (f"the git repository at {root} has no commit yet: each ticket branches from one, so "
                    "commit your files (`git add -A && git commit -m \"first commit\"`) before `middle run`")
    except Exception:  # no git installed: `middle run` says so
        return "git is not installed: install it before `middle run` (tickets run on git branches)"
    return None


def write_starter(config_path: Path, backend: str | None = None) -> list[str]:
    """Write the config file, tickets/hello.md beside it and `.middle/` in .gitignore.

    Never overwrites: an existing file is left unchanged and said so. In a project that already
    has a config or tickets, no example ticket is added (the next `middle run` would run it, and
    pay for it). Returns one line per file.
    """
    from orchestrator.config.settings import DEFAULT_BACKEND

    config_path = Path(config_path).resolve()
    root = config_path.parent
    lines: list[str] = []
    existing_project = config_path.exists()
    for path, kind in ((root / "tickets", "folder"), (root / ".gitignore", "file")):
        if path.exists() and (path.is_dir() != (kind == "folder")):  # said before anything is written
            raise ConfigError(f"{path} is a {'file' if kind == 'folder' else 'folder'}, and `middle init` "
                              f"needs a {kind} there: rename or move it, then run `middle init` again")
    try:
        if existing_project:
            lines.append(f"left {config_path} unchanged (it exists"
                         + ("; --backend was not applied: edit [memory] backend there)" if backend else ")"))
        else:
            from orchestrator.cli.check_hint import check_section, detect

            _write(config_path, STARTER_CONFIG.format(backend=backend or DEFAULT_BACKEND, project=project_id(root),
                                                      base_branch_line=_base_branch_line(root),
                                                      check_section=check_section(root)))
            found = detect(root)
            lines.append(f"wrote {config_path}" + (
                f" (its [check], commented out, runs {' and '.join(f'`{c}`' for c, _ in found)}: uncomment it "
                "to hold tickets to it)" if found else ""))
        ticket = root / "tickets" / "hello.md"
        has_tickets = any((root / "tickets").glob("*.md")) if (root / "tickets").is_dir() else False
        if ticket.exists():
            lines.append(f"left {ticket} unchanged (it exists)")
        elif existing_project or has_tickets:
            lines.append(f"added no example ticket ({root / 'tickets'} is your backlog)")
        else:
            ticket.parent.mkdir(parents=True, exist_ok=True)
            _write(ticket, STARTER_TICKET)
            lines.append(f"wrote {ticket}")
        ignore = root / ".gitignore"
        existing = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
        if not any(line.strip() in {".middle", ".middle/", "/.middle", "/.middle/"} for line in existing.splitlines()):
            sep = "" if not existing or existing.endswith("\n") else "\n"
            _write(ignore, existing + sep + "# middle-agent state (tickets DB, checkpoints, memory)\n.middle/\n")
            lines.append(f"added .middle/ to {ignore}")
    except OSError as exc:
        where = exc.filename or root
        raise ConfigError(
            f"cannot write {where} ({exc.strerror}): run `middle init` in a directory you can "
            "write to, or pass --config PATH/middle.toml") from None
    return lines


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
