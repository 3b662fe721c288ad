"""Ticket histories for `middle bench tickets`: a JSON file in the shared shape, or a git repository's log."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.gitrun import git

from .datasets import _list, _load_json, _need

TURN_CHARS = 500  # the workflow's per-turn query keeps 500 chars of the prompt and of the response


@dataclass
class HistoryTicket:
    """One completed ticket: a commit's subject and body, the paths it changed, its issue refs."""

    id: str
    date: str
    title: str
    description: str
    paths: list[str] = field(default_factory=list)
    refs: list[int] = field(default_factory=list)
    # `middle bench tickets --doc-refs`: the completion doc names the ticket's issues, as a
    # real ticket's summary does; the start and turn queries never do (they are the labels).
    refs_in_doc: bool = False

    @property
    def timestamp(self) -> float | None:
        """The ticket's date as unix seconds (None when it has no ISO date)."""
        try:
            return datetime.fromisoformat(self.date).timestamp() if self.date else None
        except ValueError:
            return None

    def start_query(self) -> str:
        """What recall at ticket start sees (the workflow contract)."""
        return f"{self.title}. {self.description}"

    def turn_query(self) -> str:
        """The workflow's per-turn query, f"{last_prompt[:500]}\\n{response[:500]}": the prompt stands
        for the ticket's title and Claude Code's response names the files it changed."""
        response = "Changed " + ", ".join(self.paths) if self.paths else "Done."
        return f"{self.title[:TURN_CHARS]}\n{response[:TURN_CHARS]}"

    def completion_doc(self) -> str:
        """The doc indexed when the ticket completes (its summary lists the changed paths)."""
        doc = f"Ticket: {self.title}. {self.description}. Changed: {', '.join(self.paths)}"
        if self.refs_in_doc and self.refs:
            doc += f". Issues: {', '.join(f'#{r}' for r in self.refs)}."
        return doc


@dataclass
class TicketHistory:
    name: str
    tickets: list[HistoryTicket]


def load_ticket_file(path: Path) -> TicketHistory:
    """A file shaped like shared/data/tickets/datasette.json; a wrong shape names file and key."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise ConfigError(f"dataset file {path} should hold a JSON object with a 'tickets' list "
                          "(the shape of shared/data/tickets/datasette.json)")
    items = _list(_need(data, "tickets", path, "the file", list), path, "tickets")
    tickets = []
    for i, item in enumerate(items):
        where = f"ticket {i}"
        files = _need(item, "files", path, where, list)
        paths = [_need(f, "path", path, f"{where} file {j}", str) for j, f in enumerate(files)]
        refs = _need(item, "refs", path, where, list)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in refs):
            raise ConfigError(f"dataset file {path}: {where}['refs'] should be a list of issue "
                              "numbers (integers)")
        tickets.append(HistoryTicket(
            str(item.get("id", i)), str(item.get("date", "")),
            _need(item, "title", path, where, str), _need(item, "description", path, where, str),
            paths, list(refs)))
    return TicketHistory(str(data.get("name") or path.stem), tickets)


# --- git history ----------------------------------------------------------------------------

_RS, _US = "\x1e", "\x1f"
# Issue references as GitHub writes them: an issue or pull URL, an optional keyword, "#123".
# "owner/repo#123", and the URL of another repository's issue, name another repository's issue:
# removed from the text, not a shared ref (as in shared/data/tickets' export). Counted, the URLs
# of plugins' own issues ("Refs https://github.com/simonw/llm-cmd/issues/1") had made pairs of
# unrelated commits "related" through their plugins' issue #1.
_URL = re.compile(r"https?://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)[^\s)\]]*",
                  re.IGNORECASE)
_KEYWORD = r"(?:(?:refs?|references|closes?|closed|fix(?:es|ed)?|resolves?|resolved|see|for|part of)\s*:?\s*)?"
_CROSS = re.compile(_KEYWORD + r"\b[\w.-]+/[\w.-]+#\d+\b", re.IGNORECASE)
_HASH = re.compile(_KEYWORD + r"(?<![\w&/])#(\d+)\b", re.IGNORECASE)
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;]?\s*\)|\[\s*\]")
_TRAILER = re.compile(r"^(?:[\w-]+-by|Change-Id|Refs?):\s.*$", re.IGNORECASE | re.MULTILINE)
# A release commit ("Release 3.2", "Releasing 0.5", "Release notes for 1.0") lists every issue
# of the release: it relates to nothing, as in shared/data/tickets' export (whose 158 release
# commits have no refs); counted, it made most long-range pairs release notes.
_RELEASE = re.compile(r"^\s*releas(?:e|ed|ing)\b", re.IGNORECASE)


def split_refs(text: str, own: str | None = None) -> tuple[str, list[int]]:
    """The text without its issue references, and the issue numbers, in order of appearance.
    `own`: the repository's "owner/name"; an issue URL of another repository is no ref (None:
    every issue URL counts)."""
    refs: list[int] = []

    def take(match: re.Match[str]) -> str:
        refs.append(int(match.group(1)))
        return " "

    def take_url(match: re.Match[str]) -> str:
        if own is None or match.group(1).lower() == own.lower():
            refs.append(int(match.group(2)))
        return " "

    text = _URL.sub(take_url, text)
    text = _CROSS.sub(" ", text)
    text = _HASH.sub(take, text)
    text = _EMPTY_BRACKETS.sub(" ", text)
    return text, list(dict.fromkeys(refs))


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(" ,;:-")


def git_log(repo: Path) -> str:
    """`git log --no-merges --reverse --numstat` with separators; ConfigError when not a repo."""
    repo = Path(repo).expanduser()
    if not repo.is_dir():
        raise ConfigError(f"--repo {repo}: no such directory; pass the folder of a git clone")
    if shutil.which("git") is None:
        raise ConfigError("--repo needs git on PATH: install git, or pass --dataset FILE")
    if git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0:
        inside = git(repo, "rev-parse", "--git-dir", check=False).returncode == 0
        raise ConfigError(f"--repo {repo.resolve()}: " + (
            "the repository has no commits yet" if inside else
            "not a git repository; pass the folder of a git clone (or --dataset FILE)"))
    log = git(repo, "-c", "core.quotepath=off", "log", "--no-merges", "--reverse", "--no-renames",
              "--numstat", f"--format={_RS}%H{_US}%aI{_US}%s{_US}%b{_US}", check=False)
    if log.returncode != 0:
        raise ConfigError(f"--repo {repo.resolve()}: git log failed: {log.stderr.strip()[:300]}")
    return log.stdout


def own_repository(log: str, origin: str = "") -> str | None:
    """The repository's own "owner/name": its origin's, when that is a GitHub URL, else the one
    whose issue URLs its history names most (a project links its own issues far more often than
    any other's). None when neither says."""
    found = re.search(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$", origin.strip(), re.IGNORECASE)
    if found:
        return found.group(1)
    counts: dict[str, int] = {}
    for match in _URL.finditer(log):
        slug = match.group(1).lower()
        counts[slug] = counts.get(slug, 0) + 1
    return max(counts, key=lambda slug: counts[slug]) if counts else None


def parse_git_log(log: str, own: str | None = None) -> list[HistoryTicket]:
    """Tickets from `git_log` output: subject as title, body as description, numstat paths.
    `own`: the repository's "owner/name" (another repository's issue URL is no ref)."""
    tickets = []
    for record in log.split(_RS)[1:]:
        sha, date, subject, body, stats = (record.split(_US) + [""] * 5)[:5]
        paths = []
        for line in stats.splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[2]:
                paths.append(parts[2])
        title, title_refs = split_refs(subject, own)
        description, body_refs = split_refs(_TRAILER.sub("", body), own)
        refs = [] if _RELEASE.match(subject) else list(dict.fromkeys(title_refs + body_refs))
        tickets.append(HistoryTicket(sha[:12], date, _clean(title) or subject.strip(),
                                     _clean(description), paths, refs))
    return tickets


def load_git_repo(repo: Path) -> TicketHistory:
    """A repository's non-merge commits, oldest first, as completed tickets."""
    log = git_log(repo)
    origin = git(repo, "config", "--get", "remote.origin.url", check=False).stdout
    tickets = parse_git_log(log, own_repository(log, origin))
    if not tickets:
        raise ConfigError(f"--repo {Path(repo).resolve()}: no non-merge commits to replay")
    return TicketHistory(Path(repo).resolve().name, tickets)
