"""The ticket folder's memo: unchanged files are not parsed again, and the memo is only a cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tickets.source as source
from tickets.source import load_tickets

OLD = 1_600_000_000  # a modification time outside the "racily clean" window


def _write(folder: Path, name: str, text: str, *, old: bool = True) -> Path:
    path = folder / name
    path.write_text(text)
    if old:
        os.utime(path, (OLD, OLD))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tickets = tmp_path / "tickets"
    tickets.mkdir()
    _write(tickets, "a.md", "---\ntitle: First\nproject: p\n---\nDo a.\n")
    _write(tickets, "b.md", "---\ntitle: Second\nproject: p\ncolour: red\n---\nDo b.\n")
    _write(tickets, "bad.md", "---\ntitle: [unclosed\nproject: p\n---\n")
    return tickets


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The files actually parsed (not served from the memo)."""
    seen: list[str] = []
    real = source._parse_with_keys

    def counting(path, *args, **kwargs):
        seen.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(source, "_parse_with_keys", counting)
    return seen


def _summary(result) -> tuple:
    return ([t.to_dict() | {"created_at": "", "updated_at": ""} for t in result.tickets],
            [str(e) for e in result.errors], [str(w) for w in result.warnings])


def test_unchanged_files_come_from_the_memo_with_the_same_outcome(folder, tmp_path, parses):
    memo = tmp_path / "memo.json"
    first = load_tickets(folder, tmp_path, max_chars=1000, memo=memo)
    assert sorted(parses) == ["a.md", "b.md", "bad.md"]
    parses.clear()
    second = load_tickets(folder, tmp_path, max_chars=1000, memo=memo)
    assert parses == []
    assert _summary(second) == _summary(first)
    assert [t.title for t in second.tickets] == ["First", "Second"]
    assert "not valid YAML" in str(second.errors[0]) and "colour" in str(second.warnings[0])
    assert second.tickets[0].created_at > first.tickets[0].created_at  # stamped when loaded


def test_a_changed_file_is_parsed_again_even_at_the_same_size(folder, tmp_path, parses):
    memo = tmp_path / "memo.json"
    load_tickets(folder, tmp_path, memo=memo)
    parses.clear()
    path = folder / "a.md"
    path.write_text(path.read_text().replace("First", "Fir5t"))
    os.utime(path, (OLD + 10, OLD + 10))
    result = load_tickets(folder, tmp_path, memo=memo)
    assert parses == ["a.md"]
    assert result.tickets[0].title == "Fir5t"


def test_a_file_written_just_now_is_not_remembered(folder, tmp_path, parses):
    memo = tmp_path / "memo.json"
    _write(folder, "c.md", "---\ntitle: Third\nproject: p\n---\n", old=False)
    load_tickets(folder, tmp_path, memo=memo)
    parses.clear()
    load_tickets(folder, tmp_path, memo=memo)
    assert parses == ["c.md"]  # its stamp could still move within the file system's resolution


def test_a_file_written_while_it_is_read_is_not_remembered(folder, tmp_path, monkeypatch):
    """Another process writes the file between our read and our stamp: what we read (half of
    it) must not be remembered under the new file's stamp."""
    memo = tmp_path / "memo.json"
    real = source._parse_with_keys

    def read_then_written(path, *args, **kwargs):
        outcome = real(path, *args, **kwargs)
        if path.name == "a.md":
            _write(folder, "a.md", "---\ntitle: Written meanwhile\nproject: p\n---\n")
        return outcome

    monkeypatch.setattr(source, "_parse_with_keys", read_then_written)
    assert load_tickets(folder, tmp_path, memo=memo).tickets[0].title == "First"
    monkeypatch.setattr(source, "_parse_with_keys", real)
    assert load_tickets(folder, tmp_path, memo=memo).tickets[0].title == "Written meanwhile"


def test_a_removed_file_or_project_folder_is_noticed(folder, tmp_path):
    memo = tmp_path / "memo.json"
    project = tmp_path / "proj"
    project.mkdir()
    assert len(load_tickets(folder, project, memo=memo).tickets) == 2
    (folder / "b.md").unlink()
    assert [t.title for t in load_tickets(folder, project, memo=memo).tickets] == ["First"]
    project.rmdir()
    result = load_tickets(folder, project, memo=memo)
    assert result.tickets == [] and "does not exist" in str(result.errors[0])


def test_other_settings_do_not_share_outcomes(folder, tmp_path):
    memo = tmp_path / "memo.json"
    assert len(load_tickets(folder, tmp_path, max_chars=1000, memo=memo).tickets) == 2
    result = load_tickets(folder, tmp_path, max_chars=10, memo=memo)
    assert result.tickets == [] and all("max_ticket_chars" in str(e) for e in result.errors)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"context": 1, "files": []}'])
def test_a_corrupt_memo_is_ignored_and_rewritten(folder, tmp_path, content):
    memo = tmp_path / "memo.json"
    memo.write_text(content)
    assert len(load_tickets(folder, tmp_path, memo=memo).tickets) == 2
    assert set(json.loads(memo.read_text())["files"]) == {"a.md", "b.md", "bad.md"}


def test_a_tampered_entry_is_checked_like_a_new_ticket(folder, tmp_path, parses):
    """The memo is untrusted input: a remembered ticket with an unsafe id is not served."""
    memo = tmp_path / "memo.json"
    load_tickets(folder, tmp_path, memo=memo)
    data = json.loads(memo.read_text())
    data["files"]["a.md"]["ticket"]["id"] = "../escape"
    data["files"]["b.md"]["ticket"] = "not a ticket"
    memo.write_text(json.dumps(data))
    parses.clear()
    result = load_tickets(folder, tmp_path, memo=memo)
    assert sorted(parses) == ["a.md", "b.md"]
    assert [t.id for t in result.tickets] == ["a", "b"]


def test_a_memo_in_an_unwritable_place_does_not_fail_the_load(folder, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert len(load_tickets(folder, tmp_path, memo=blocker / "memo.json").tickets) == 2


LOADER = """
import sys
from tickets.source import load_tickets
folder, project, memo, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for _ in range(rounds):
    result = load_tickets(folder, project, memo=memo)
    assert len(result.tickets) == 2 and len(result.errors) == 1, (result.tickets, result.errors)
    print(sorted(t.title for t in result.tickets), flush=True)
"""


def _loader(folder, tmp_path, memo, rounds):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", LOADER, str(folder), str(tmp_path), str(memo), str(rounds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_share_the_memo_while_a_file_changes(folder, tmp_path):
    memo = tmp_path / "memo.json"
    procs = [_loader(folder, tmp_path, memo, 40) for _ in range(2)]
    for i in range(20):  # a third process's edits: each old enough to be remembered
        # Written whole and renamed in, as editors save, so every load sees two tickets; a
        # file read half-written is tested above.
        staged = _write(folder, ".a.md.new", f"---\ntitle: First {i % 2}\nproject: p\n---\nDo a.\n")
        os.utime(staged, (OLD + i, OLD + i))
        os.replace(staged, folder / "a.md")
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert all("Second" in line for line in out.splitlines())
    final = load_tickets(folder, tmp_path, memo=memo)
    assert [t.title for t in final.tickets] == ["First 1", "Second"]  # the last edit, not a stale one
    assert set(json.loads(memo.read_text())["files"]) <= {"a.md", "b.md", "bad.md"}


def test_a_process_killed_while_writing_the_memo_leaves_it_whole_or_ignored(folder, tmp_path):
    import signal
    import time

    memo = tmp_path / "memo.json"
    for attempt in range(5):
        proc = _loader(folder, tmp_path, memo, 10_000)
        proc.stdout.readline()  # it is loading (and rewriting the memo as files change)
        _write(folder, "b.md", f"---\ntitle: Second {attempt}\nproject: p\n---\nDo b.\n")
        os.utime(folder / "b.md", (OLD + attempt, OLD + attempt))
        time.sleep(0.05 * attempt)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        json.loads(memo.read_text())  # never half written (replaced atomically)
        result = load_tickets(folder, tmp_path, memo=memo)
        assert sorted(t.title for t in result.tickets) == ["First", f"Second {attempt}"]
