"""The tails of GitHub Actions job logs a pull request's failed CI showed, kept beside the ETag
cache (`.middle/github/OWNER__REPO.job-logs.json`) so each (run, job) log is downloaded once, not
on every `middle sync` (a job's log does not change once it has failed; a re-run is a new job).

The file is untrusted input: one that is not JSON, of another version or API URL, or with an
entry that is not a short string is ignored (that log is downloaded again), never an error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tickets.cache_file import read_json, write_json

VERSION = 1
MAX_ENTRIES = 200  # the most recently used kept; each at most the tail the feedback shows
JOB_URL = re.compile(r"/actions/runs/(\d+)/job/(\d+)")


def job_key(check: dict[str, Any]) -> str:
    """`RUN/JOB` of an Actions check run (its details URL names both), else `?/JOB`."""
    found = JOB_URL.search(str(check.get("details_url") or ""))
    return f"{found.group(1)}/{found.group(2)}" if found else f"?/{check.get('id')}"


class JobLogs:
    """The kept log tails of one repository's Actions jobs: `get`, `put`, then `save` once."""

    def __init__(self, path: Path | None, api_url: str, max_chars: int) -> None:
        self.path, self.api_url, self.max_chars = path, api_url, max_chars
        self._entries = self._read()
        self._changed = False

    def _read(self) -> dict[str, str]:
        data = read_json(self.path) if self.path is not None else None
        if not isinstance(data, dict) or data.get("version") != VERSION or data.get("api") != self.api_url:
            return {}
        entries = data.get("entries")
        if not isinstance(entries, dict):
            return {}
        return {k: v for k, v in entries.items()
                if isinstance(k, str) and isinstance(v, str) and len(v) <= self.max_chars}

    def get(self, key: str) -> str | None:
        return self._entries.get(key)

    def put(self, key: str, tail: str) -> None:
        self._entries.pop(key, None)
        self._entries[key] = tail[-self.max_chars:]  # last: kept longest
        self._changed = True

    def save(self) -> None:
        if self.path is None or not self._changed:
            return
        kept = dict(list(self._entries.items())[-MAX_ENTRIES:])
        write_json(self.path, {"version": VERSION, "api": self.api_url, "entries": kept})
        self._changed = False


def job_logs_for(state_dir: Path | None, repo: str, api_url: str, max_chars: int) -> JobLogs:
    path = state_dir / "github" / f"{repo.replace('/', '__')}.job-logs.json" if state_dir is not None else None
    return JobLogs(path, api_url, max_chars)
