"""The project's commit history as memory: one doc per non-merge commit (subject, body, changed
paths, date), imported incrementally from the last commit an earlier import recorded."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from orchestrator.errors import GitError, MiddleError
from orchestrator.gitrun import git
from orchestrator.killpoints import point
from orchestrator.memory.importers import Advance, ImportReport, Note, Record, import_lock, index_batches

MAX_PATHS = 20  # changed paths named in a commit's doc; the rest are counted
_RS, _US = "\x1e", "\x1f"
_FORMAT = f"{_RS}%H{_US}%at{_US}%an{_US}%s{_US}%b{_US}"


@dataclass(frozen=True)
class Commit:
    sha: str
    time: float
    author: str
    subject: str
    body: str
    paths: tuple[str, ...]

    def doc(self) -> str:
        """The commit's memory doc: what changed, why (the message), where, and when."""
        day = datetime.fromtimestamp(self.time, timezone.utc).date().isoformat()
        lines = [f"Commit {self.sha[:10]} ({day}, {self.author}): {self.subject}"]
        if self.body.strip():
            lines.append(self.body.strip())
        if self.paths:
            named = ", ".join(self.paths[:MAX_PATHS])
            more = len(self.paths) - MAX_PATHS
            lines.append(f"Changed: {named}" + (f" and {more} more" if more > 0 else ""))
        return "\n".join(lines)


def _git(repo: Path, *args: str) -> str:
    """git's output, paths unquoted (UTF-8 as they are, not C-escaped)."""
    return git(repo, "-c", "core.quotePath=false", *args).stdout


def repo_head(repo: Path) -> str:
    """The repository's HEAD commit; a clear error when `repo` is not a repository with commits."""
    if not repo.is_dir():
        raise GitError(f"{repo} does not exist: pass the project's repository with --repo")
    try:
        _git(repo, "rev-parse", "--git-dir")
    except GitError:
        raise GitError(f"{repo} is not a git repository: run it in the project's repository "
                       "or pass --repo PATH") from None
    try:
        return _git(repo, "rev-parse", "--verify", "HEAD^{commit}").strip()
    except GitError:
        raise GitError(f"{repo} has no commits yet: there is no history to import") from None


def resolve(repo: Path, ref: str) -> str:
    """The commit `ref` names, or a clear error."""
    try:
        return _git(repo, "rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}").strip()
    except GitError:
        raise GitError(f"--since {ref!r} names no commit in {repo}: give a commit, tag or "
                       "branch of that repository") from None


def has_commit(repo: Path, sha: str) -> bool:
    try:
        _git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
        return True
    except GitError:
        return False


def count(repo: Path, head: str, exclude: list[str]) -> int:
    return int(_git(repo, "rev-list", "--count", "--no-merges", head, *[f"^{e}" for e in exclude]))


def commits(repo: Path, head: str, exclude: list[str]) -> Iterator[Commit]:
    """The non-merge commits reachable from head and not from `exclude`, parents first."""
    out = _git(repo, "log", "--no-merges", "--topo-order", "--reverse", "--name-only",
               f"--format={_FORMAT}", head, *[f"^{e}" for e in exclude], "--")
    for record in out.split(_RS)[1:]:
        sha, at, author, subject, body, names = record.split(_US, 5)
        paths = tuple(p for p in names.splitlines() if p.strip())
        yield Commit(sha, float(at), author, subject.strip(), body, paths)


def import_history(memory: Any, project_id: str, repo: Path, state_dir: Path, since: str | None,
                   track: Callable[[str, int], Advance],
                   note: Note | None = None) -> tuple[ImportReport, int]:
    """Index the commits not imported yet (after `since`, after the last recorded import),
    oldest first, recording the last imported commit after every batch so a rerun goes on
    from there. Returns the report and how many commits the range held. One import of the
    project at a time (import_lock). `note` (when given) records each batch's commits as its
    docs' origins, after the batch is indexed and before the record moves past it: a rerun
    after a kill between the two re-reads that batch and records them then (a commit behind
    the record is never read again, so its origin must be written before the record moves)."""
    head = repo_head(repo)
    repo = Path(_git(repo, "rev-parse", "--show-toplevel").strip()).resolve()  # one record per repository
    exclude = [resolve(repo, since)] if since else []
    with import_lock(state_dir, project_id):
        return _import(memory, project_id, repo, head, exclude, state_file(state_dir, project_id),
                       track, note)


def _import(memory: Any, project_id: str, repo: Path, head: str, exclude: list[str],
            record: Path, track: Callable[[str, int], Advance],
            note: Note | None = None) -> tuple[ImportReport, int]:
    """import_history's work, under the import lock (the only writer of the record)."""
    last = read_last(record, repo)
    if last and has_commit(repo, last):  # else history was rewritten: every commit is rechecked
        exclude.append(last)
    total = count(repo, head, exclude)
    advance = track(f"importing {total} commit(s) of {repo.name}", total)
    shas: list[str] = []
    origins: dict[str, dict[str, Any]] = {}  # the current batch's (a batch is read whole before it is indexed)

    def docs() -> Iterator[Record]:
        for commit in commits(repo, head, exclude):
            shas.append(commit.sha)
            doc = commit.doc()
            origins[doc] = {"kind": "commit", "commit": commit.sha, "author": commit.author,
                            "repo": str(repo)}
            yield doc, commit.time

    def mark(done: int) -> None:
        if note is not None and origins:
            note(dict(origins))
            point("import.noted")
        origins.clear()
        write_last(record, repo, head if done == total else shas[done - 1])

    report = index_batches(memory, project_id, docs(), advance, mark)
    if total == 0 and last != head:
        mark(0)  # nothing new (or only merges): HEAD is where the next import starts
    return report, total


# -- the record of what was imported: <state_dir>/imports/<project>.json -------------------------

def state_file(state_dir: Path, project_id: str) -> Path:
    return state_dir / "imports" / f"{project_id}.json"


def read_last(path: Path, repo: Path) -> str | None:
    """The last commit imported from `repo`, or None; a corrupt record is a clear error."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        raise _corrupt(path, f"unreadable: {exc}") from None
    # The record is read, never run: only this shape is accepted, {"git": {repo: {"last": sha}}}.
    if not isinstance(data, dict):
        raise _corrupt(path, f"a JSON {type(data).__name__}, not an object")
    repos = data.get("git", {})
    if not isinstance(repos, dict):
        raise _corrupt(path, "its \"git\" entry is not an object")
    entry = repos.get(str(repo))
    if entry is None:
        return None
    last = entry.get("last") if isinstance(entry, dict) else None
    if not (isinstance(last, str) and len(last) in (40, 64)
            and all(c in "0123456789abcdef" for c in last)):
        raise _corrupt(path, f"no valid last commit for {repo}")
    return last


def _corrupt(path: Path, why: str) -> MiddleError:
    return MiddleError(f"the import record {path} is corrupt ({why}): delete it to import the "
                       "whole history again (docs already in memory are skipped)")


def write_last(path: Path, repo: Path, sha: str) -> None:
    """Record `sha` as the last commit imported from `repo`, atomically (call under the
    import lock: another import of the project would write the same file)."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    git = data.get("git")
    if not isinstance(git, dict):
        git = data["git"] = {}
    git[str(repo)] = {"last": sha, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    except OSError as exc:
        raise _unwritable(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _unwritable(path, exc) from None
        raise


def _unwritable(path: Path, exc: OSError) -> MiddleError:
    return MiddleError(f"cannot write the import record {path} ({exc.strerror or exc}): free disk "
                       "space or fix that folder's permissions, then run the same import again "
                       "(docs already in memory are skipped)")
