"""Tests for the Markdown ticket source: front matter rules, paths, ids and per-file errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import TicketError
from tickets.model import TicketStatus
from tickets.source import (
    LoadResult,
    MarkdownFolderSource,
    TicketFileError,
    load_ticket_file,
    load_tickets,
)


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "backlog"
    path.mkdir()
    return path


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = "---\ntitle: Add login\nproject: web\n---\n\n  Build the login form.\n\n"


def only_error(result: LoadResult) -> TicketFileError:
    assert len(result.errors) == 1, result.errors
    return result.errors[0]


def test_a_good_ticket(folder, repo):
    path = write(folder, "T-1.md", GOOD)
    result = load_tickets(folder, repo)
    assert result.errors == []
    [t] = result.tickets
    assert (t.id, t.project_id, t.title) == ("T-1", "web", "Add login")
    assert t.description == "Build the login form."
    assert t.project_path == str(repo.resolve())
    assert t.source == str(path.resolve())
    assert t.status is TicketStatus.PENDING and t.fields == {}


def test_explicit_id_and_extra_fields(folder, repo):
    write(folder, "a.md", "---\ntitle: T\nproject: web\nid: LOGIN-7\npriority: high\n"
                          "labels: [ui, auth]\ndue: 2025-03-01\nestimate: 2.5\n---\nbody")
    [t] = load_tickets(folder, repo).tickets
    assert t.id == "LOGIN-7"
    assert t.fields == {"priority": "high", "labels": ["ui", "auth"], "due": "2025-03-01", "estimate": 2.5}


def test_a_tickets_checks_and_whether_they_must_pass_are_kept_without_a_warning(folder, repo):
    write(folder, "a.md", "---\ntitle: T\nproject: web\ncheck: [\"python -m pytest -q tests/test_repro.py\"]\n"
                          "check_must_pass: true\n---\nThe repro fails.")
    result = load_tickets(folder, repo)
    assert result.errors == [] and result.warnings == []
    [t] = result.tickets
    assert t.fields == {"check": ["python -m pytest -q tests/test_repro.py"], "check_must_pass": True}


def test_numeric_title_and_project_are_read_as_text(folder, repo):
    write(folder, "a.md", "---\ntitle: 2048\nproject: 42\n---\n")
    [t] = load_tickets(folder, repo).tickets
    assert (t.title, t.project_id, t.description) == ("2048", "42", "")


def test_description_field_stands_in_for_an_empty_body(folder, repo):
    write(folder, "a.md", "---\ntitle: T\nproject: web\ndescription: from the field\n---\n\n")
    write(folder, "b.md", "---\ntitle: T\nproject: web\ndescription: short\n---\nthe body")
    a, b = load_tickets(folder, repo).tickets
    assert a.description == "from the field" and "description" not in a.fields
    assert b.description == "the body" and b.fields == {"description": "short"}


def test_tickets_load_sorted_by_file_name_and_skip_other_files(folder, repo):
    for name in ("b.md", "a.md", "c.md"):
        write(folder, name, GOOD)
    write(folder, "notes.txt", "not a ticket")
    write(folder, ".#a.md", "editor lock file")
    (folder / "sub").mkdir()
    write(folder / "sub", "d.md", GOOD)
    result = load_tickets(folder, repo)
    assert [t.id for t in result.tickets] == ["a", "b", "c"]
    assert result.errors == []


def test_relative_path_resolves_against_the_ticket_folder(tmp_path, folder, monkeypatch):
    (folder / "app").mkdir()
    (tmp_path / "sibling").mkdir()
    write(folder, "a.md", "---\ntitle: T\nproject: web\npath: app\n---\n")
    write(folder, "b.md", "---\ntitle: T\nproject: web\npath: ../sibling\n---\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    a, b = load_tickets(folder, None).tickets
    assert a.project_path == str((folder / "app").resolve())
    assert b.project_path == str((tmp_path / "sibling").resolve())


def test_absolute_path_field_wins_over_default(folder, repo, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    write(folder, "a.md", f"---\ntitle: T\nproject: web\npath: {other}\n---\n")
    [t] = load_tickets(folder, repo).tickets
    assert t.project_path == str(other.resolve())


def test_missing_folder_raises(tmp_path):
    with pytest.raises(TicketError, match="does not exist") as info:
        load_tickets(tmp_path / "nope", tmp_path)
    assert str(tmp_path / "nope") in str(info.value)


def test_folder_that_is_a_file_raises(folder, repo):
    path = write(folder, "x.md", GOOD)
    with pytest.raises(TicketError, match="is not a folder"):
        load_tickets(path, repo)


def test_empty_folder_loads_nothing(folder, repo):
    result = load_tickets(folder, repo)
    assert result.tickets == [] and result.errors == []


BAD_FILES = {
    "no front matter": ("# Just a heading\n", "no YAML front matter"),
    "unclosed front matter": ("---\ntitle: T\nproject: web\n", "never closed"),
    "bad yaml": ("---\ntitle: T\nproject: [web\n---\n", "not valid YAML at line 3 (a '[' is never closed)"),
    "unclosed quote": ("---\ntitle: \"T\nproject: web\n---\n", "not valid YAML at line 2 (a quoted value is never"),
    "misplaced colon": ("---\ntitle: T\nproject: a: b\n---\n", "not valid YAML at line 3 (mapping values"),
    "list front matter": ("---\n- a\n- b\n---\n", "is a list, not a mapping"),
    "scalar front matter": ("---\njust text\n---\n", "is a str, not a mapping"),
    "empty front matter": ("---\n---\nbody\n", "missing 'title'"),
    "missing title": ("---\nproject: web\n---\n", "missing 'title'"),
    "empty title": ("---\ntitle: '   '\nproject: web\n---\n", "missing 'title'"),
    "title not text": ("---\ntitle: [a, b]\nproject: web\n---\n", "'title' is a list, not text"),
    "missing project": ("---\ntitle: T\n---\n", "missing 'project'"),
    "unsafe project": ("---\ntitle: T\nproject: ../etc\n---\n", "project id '../etc'"),
    "project with slash": ("---\ntitle: T\nproject: a/b\n---\n", "fix the 'project' field"),
    "unsafe id": ("---\ntitle: T\nproject: web\nid: ../../x\n---\n", "fix the 'id' field"),
    "missing path": ("---\ntitle: T\nproject: web\npath: no/such/dir\n---\n", "does not exist"),
    "path is a file": ("---\ntitle: T\nproject: web\npath: bad.md\n---\n", "is not a directory"),
    "check not a list": ("---\ntitle: T\nproject: web\ncheck: pytest\n---\n", "'check' must be a list"),
    "check_must_pass not true or false": ("---\ntitle: T\nproject: web\ncheck_must_pass: yes please\n---\n",
                                          "'check_must_pass' must be true or false"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_malformed_file_is_reported_and_the_others_still_load(folder, repo, case):
    text, expected = BAD_FILES[case]
    write(folder, "a-good.md", GOOD)
    bad = write(folder, "bad.md", text)
    write(folder, "z-good.md", GOOD)
    result = load_tickets(folder, repo)
    assert [t.id for t in result.tickets] == ["a-good", "z-good"]
    err = only_error(result)
    assert err.path == str(bad.resolve())
    assert expected in err.message
    assert str(err) == f"{bad.resolve()}: {err.message}"
    # the single-file loader reports the same problem, naming the file
    with pytest.raises(TicketError) as info:
        load_ticket_file(bad, repo)
    assert str(info.value) == str(err)


def test_unsafe_file_name_suggests_renaming_or_an_id(folder, repo):
    bad = write(folder, "my ticket.md", GOOD)
    err = only_error(load_tickets(folder, repo))
    assert "ticket id 'my ticket'" in err.message and "rename the file or add an 'id' field" in err.message
    assert err.path == str(bad.resolve())


def test_missing_default_path_is_reported_per_ticket(folder, tmp_path):
    write(folder, "a.md", GOOD)
    err = only_error(load_tickets(folder, tmp_path / "gone"))
    assert "does not exist" in err.message and "'path' field" in err.message


def test_no_path_and_no_default(folder):
    write(folder, "a.md", GOOD)
    err = only_error(load_tickets(folder, None))
    assert "no project path" in err.message


def test_not_utf8_file(folder, repo):
    (folder / "bin.md").write_bytes(b"---\ntitle: \xff\xfe\n---\n")
    assert "not UTF-8" in only_error(load_tickets(folder, repo)).message


def test_duplicate_id_keeps_the_first_and_names_both_files(folder, repo):
    first = write(folder, "a.md", "---\ntitle: First\nproject: web\nid: SAME\n---\n")
    second = write(folder, "b.md", "---\ntitle: Second\nproject: web\nid: SAME\n---\n")
    result = load_tickets(folder, repo)
    assert [t.title for t in result.tickets] == ["First"]
    err = only_error(result)
    assert err.path == str(second.resolve())
    assert "'SAME'" in err.message and str(first.resolve()) in err.message


def test_file_stem_colliding_with_explicit_id(folder, repo):
    write(folder, "a.md", "---\ntitle: A\nproject: web\nid: b\n---\n")
    write(folder, "b.md", GOOD)
    result = load_tickets(folder, repo)
    assert [t.title for t in result.tickets] == ["A"]
    assert "also used by" in only_error(result).message


def test_load_ticket_file(folder, repo):
    path = write(folder, "one.md", GOOD)
    t = load_ticket_file(path, repo)
    assert (t.id, t.title) == ("one", "Add login")
    with pytest.raises(TicketError, match="no such ticket file") as info:
        load_ticket_file(folder / "missing.md", repo)
    assert str((folder / "missing.md").resolve()) in str(info.value)


def test_byte_order_mark_and_crlf_are_accepted(folder, repo):
    (folder / "win.md").write_bytes("\ufeff---\r\ntitle: Win\r\nproject: web\r\n---\r\nBody\r\n".encode())
    [t] = load_tickets(folder, repo).tickets
    assert (t.title, t.description) == ("Win", "Body")


def test_markdown_folder_source(folder, repo):
    write(folder, "a.md", GOOD)
    write(folder, "b.md", "nope")
    result = MarkdownFolderSource(folder, repo).load()
    assert [t.id for t in result.tickets] == ["a"] and len(result.errors) == 1
