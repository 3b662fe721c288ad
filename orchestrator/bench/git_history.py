"""A git repository of N commits built in one `git fast-import`, from a ticket history's commits."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from orchestrator.errors import ConfigError
from orchestrator.gitrun import git

from .ticket_data import HistoryTicket

START = 1_500_000_000  # the first commit's time (2017); each next commit is an hour later
AUTHOR = "Bench Author <bench@example.com>"


def build_repo(dest: Path, tickets: Sequence[HistoryTicket], commits: int) -> Path:
    """A new repository at dest whose main branch holds `commits` linear commits: the tickets'
    messages and changed paths in order, again from the first with a round number once they
    run out (so every commit's doc is distinct)."""
    if not tickets:
        raise ConfigError("the ticket history has no tickets to build commits from")
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "main")
    stream = []
    for n in range(commits):
        ticket = tickets[n % len(tickets)]
        round_ = n // len(tickets)
        title = ticket.title if not round_ else f"{ticket.title} (round {round_ + 1})"
        message = title + (f"\n\n{ticket.description}" if ticket.description.strip() else "")
        stream.append(_commit(n, message, ticket.paths or ["README.md"]))
    git(dest, "fast-import", "--quiet", input=b"".join(stream))  # a few MB for thousands of commits
    git(dest, "checkout", "-q", "-f", "main")
    return dest


def _commit(n: int, message: str, paths: Sequence[str]) -> bytes:
    when = START + n * 3600
    body = message.encode("utf-8", "replace")
    lines = [b"commit refs/heads/main", b"mark :%d" % (n + 1),
             f"committer {AUTHOR} {when} +0000".encode(), b"data %d" % len(body), body]
    if n:
        lines.append(b"from :%d" % n)
    for path in dict.fromkeys(paths):
        content = f"{n}\n".encode()
        lines += [b"M 100644 inline " + _quote(path), b"data %d" % len(content), content]
    return b"\n".join(lines) + b"\n\n"


def _quote(path: str) -> bytes:
    """A fast-import path: C-quoted when it holds a quote, a newline or starts with one."""
    if any(c in path for c in '"\n\\') or path.startswith(" "):
        escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'.encode()
    return path.encode()
