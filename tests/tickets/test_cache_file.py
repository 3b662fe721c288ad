"""The JSON memo files: atomic replacement, and what a writer killed mid-write leaves behind."""

from __future__ import annotations

import json
import os
import time

from tickets.cache_file import LEFTOVER_S, read_json, write_json


def test_a_write_replaces_the_file_whole_and_private(tmp_path):
    memo = tmp_path / "cache" / "memo.json"
    write_json(memo, {"a": 1})
    write_json(memo, {"a": 2})
    assert read_json(memo) == {"a": 2}
    assert memo.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in memo.parent.iterdir()] == ["memo.json"]


def test_temporary_files_of_killed_writers_are_swept_by_the_next_write(tmp_path):
    memo = tmp_path / "memo.json"
    old = tmp_path / ".memo-killed.tmp"  # what mkstemp left when its writer got kill -9
    live = tmp_path / ".memo-writing.tmp"  # another process's write in progress
    other = tmp_path / ".plugins-killed.tmp"  # another memo's: its own writes sweep it
    for path in (old, live, other):
        path.write_text("{half")
    stale = time.time() - LEFTOVER_S - 60
    os.utime(old, (stale, stale))
    os.utime(other, (stale, stale))
    write_json(memo, [1])
    assert json.loads(memo.read_text()) == [1]
    assert not old.exists() and live.exists() and other.exists()


def test_unreadable_or_foreign_content_reads_as_nothing(tmp_path):
    memo = tmp_path / "memo.json"
    assert read_json(memo) is None
    memo.write_text("{not json")
    assert read_json(memo) is None
