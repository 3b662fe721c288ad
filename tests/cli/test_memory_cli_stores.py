"""`middle memory` as a user runs it, one process per command: ids, add, delete, read-only
commands under a switched backend, stores and reindex."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memory_cli_helpers import middle

from orchestrator.memory.facade import doc_id
from orchestrator.testing import make_repo


@pytest.fixture
def workdir(tmp_path):
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    use_backend(tmp_path, "bm25")
    return tmp_path


def use_backend(root: Path, backend: str) -> None:
    options = '\n[memory.options]\nembedder = "hashing"\n' if backend not in ("bm25", "sliding_window") else ""
    (root / "middle.toml").write_text(
        f'[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        f'backend = "{backend}"\n{options}')


def test_ids_add_and_delete(workdir):
    first = middle(workdir, "add", "Ticket: Fix login. Reset the cookie.")
    assert f"added 1 doc (id {doc_id('Ticket: Fix login. Reset the cookie.')[:8]}) to" in first.stdout
    again = middle(workdir, "add", "Ticket: Fix login. Reset the cookie.")
    assert again.stdout.startswith("already in memory (id ")
    middle(workdir, "add", "Ticket: Speed up export.")
    listed = middle(workdir, "list").stdout.splitlines()
    assert listed == [f"{doc_id(d)[:8]}  {d}" for d in
                      ("Ticket: Fix login. Reset the cookie.", "Ticket: Speed up export.")]
    gone = middle(workdir, "delete", listed[1][:6])
    assert gone.stdout.strip() == (f"deleted doc {listed[1][:8]} (change 3; `middle memory undo 3` "
                                   "puts it back)")
    middle(workdir, "delete", "Ticket: Fix login. Reset the cookie.")  # the exact text works too
    error = middle(workdir, "delete", "abcd", ok=False).stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: no doc in project 'demo' has an id "
                                                   "starting 'abcd'")
    assert middle(workdir, "list").stdout == ""


def test_read_only_commands_under_a_switched_backend_create_no_store(workdir):
    middle(workdir, "add", "kept in bm25")
    store = workdir / ".middle" / "memory" / "demo"
    before = sorted(p.name for p in store.iterdir())
    use_backend(workdir, "dense")
    assert middle(workdir, "list").stdout == ""
    assert "(no memories)" in middle(workdir, "search", "kept").stdout
    assert '"docs": []' in middle(workdir, "export").stdout
    assert "bm25" in middle(workdir, "stores").stdout
    assert sorted(p.name for p in store.iterdir()) == before  # no dense.sqlite3
    assert not (workdir / ".middle" / "memory" / "other").exists()
    middle(workdir, "list", "--project", "other", ok=False)  # an unknown project (see below)
    assert not (workdir / ".middle" / "memory" / "other").exists()


def test_a_mistyped_project_is_an_error_naming_the_known_ones_unless_created_on_purpose(workdir):
    """A mistyped `-p` once started a new, empty store the project's tickets never read."""
    middle(workdir, "add", "kept in demo")
    for args in (["add", "lost", "-p", "demoo"], ["search", "kept", "-p", "demoo"],
                 ["import", "git", "-p", "demoo"]):
        lines = middle(workdir, *args, ok=False).stderr.strip().splitlines()
        assert lines == ["error: no project 'demoo' here (known: demo): check the project id, or "
                         "pass --create (`middle memory add --create` or `middle memory import --create`) "
                         "to start its memory on purpose"], lines
    assert not (workdir / ".middle" / "memory" / "demoo").exists()
    assert "added 1 doc" in middle(workdir, "add", "a new project's first doc", "-p", "demoo", "--create").stdout
    assert "a new project's first doc" in middle(workdir, "search", "first", "-p", "demoo").stdout  # known now
    assert "kept in demo" in middle(workdir, "search", "kept", "-p", "demo").stdout


def test_reindex_from_the_old_backend(workdir):
    middle(workdir, "add", "first memory about caching")
    middle(workdir, "add", "second memory about parsing")
    use_backend(workdir, "hybrid")
    done = middle(workdir, "reindex", "--from", "bm25")
    assert done.stdout.strip() == "reindexed 2 doc(s) from bm25 into hybrid"
    assert middle(workdir, "search", "parsing", "-k", "1").stdout.strip().endswith(
        "second memory about parsing")
    again = middle(workdir, "reindex", "--from", "bm25")
    assert "reindexed 0 doc(s)" in again.stdout and "2 already there" in again.stdout
    error = middle(workdir, "reindex", "--from", "hipporag", ok=False).stderr.strip().splitlines()
    assert len(error) == 1 and "has no hipporag store" in error[0]


def test_a_query_or_doc_over_its_limit_is_one_error_line_and_changes_nothing(workdir):
    middle(workdir, "add", "Ticket: Fix login. Reset the cookie.")
    store = workdir / ".middle" / "memory" / "demo"
    before = {p.name: p.stat().st_mtime_ns for p in store.iterdir()}
    long_query = "login " * 700  # 4,200 characters: over the default max_query_chars of 4,000
    error = middle(workdir, "search", long_query, ok=False).stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: a query of 4,200 characters is over "
                                                   "[memory] max_query_chars (4,000)"), error
    long_doc = "x" * 20_001  # over the default max_doc_chars: refused, not cut silently
    error = middle(workdir, "add", long_doc, ok=False).stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: a doc of 20,001 characters is over "
                                                   "[memory] max_doc_chars (20,000)"), error
    assert middle(workdir, "list").stdout.count("\n") == 1
    assert {p.name: p.stat().st_mtime_ns for p in store.iterdir()} == before
    assert "Fix login" in middle(workdir, "search", "login " * 600).stdout  # 3,600: within it


def test_a_multi_line_doc_prints_its_lines_under_its_entry(workdir):
    doc = "Commit 8b22590d93: Add multiplication\nCreated calc/mul.py.\nChanged: calc/mul.py"
    middle(workdir, "add", doc)
    middle(workdir, "add", "Ticket: Speed up export.")
    ident = doc_id(doc)[:8]
    listed = middle(workdir, "list").stdout.splitlines()
    assert listed[:3] == [f"{ident}  Commit 8b22590d93: Add multiplication",
                          " " * 10 + "Created calc/mul.py.", " " * 10 + "Changed: calc/mul.py"]
    found = middle(workdir, "search", "multiplication mul.py", "-k", "1").stdout.splitlines()
    assert len(found) == 3 and found[0].endswith(f"  [{ident}] Commit 8b22590d93: Add multiplication")
    assert found[1:] == [" " * 20 + "Created calc/mul.py.", " " * 20 + "Changed: calc/mul.py"]


def test_curation_verbs_and_their_mistakes_as_a_user_runs_them(workdir, tmp_path):
    old = "Ticket: Fix login. Reset the cookie."
    middle(workdir, "add", old)
    ident = doc_id(old)[:8]
    editor = tmp_path / "editor.sh"  # what a person does in $EDITOR: change a word, save
    editor.write_text('#!/bin/sh\nsed -i "s/the cookie/the session cookie/" "$1"\n')
    editor.chmod(0o755)
    edited = middle(workdir, "edit", ident, env={"EDITOR": str(editor), "VISUAL": str(editor)})
    new = "Ticket: Fix login. Reset the session cookie."
    assert edited.stdout.strip() == f"edited doc {ident}: it is now {doc_id(new)[:8]} (change 2)"
    middle(workdir, "supersede", doc_id(new)[:8], "--with", "Ticket: Fix login. Sessions use JWT now.")
    shown = middle(workdir, "show", doc_id(new)[:8]).stdout
    assert "from: added by hand," in shown and "superseded by:" in shown and "edited" in shown
    listed = middle(workdir, "list").stdout.splitlines()
    at = listed.index(f"{doc_id(new)[:8]}  {new}")
    assert listed[at + 1] == " " * 10 + "(superseded by " + doc_id("Ticket: Fix login. Sessions use JWT now.")[:8] + ")"
    for args, words in [
        (("show", "zz"), "no doc in project 'demo' has exactly that text"),
        (("edit", "abcdef12", "--text", "x"), "no doc in project 'demo' has an id starting 'abcdef12'"),
        (("edit", doc_id(new)[:8], "--text", "  "), "the new text is empty"),
        (("supersede", doc_id(new)[:8], "--with", "again"), "was already superseded by"),
        (("pin", doc_id(new)[:8]), "was superseded by"),
        (("undo", "42"), "project 'demo' has no memory change 42"),
        (("search", "  "), "the query is empty: give the words to look for"),
    ]:
        error = middle(workdir, *args, ok=False).stderr.strip().splitlines()
        assert len(error) == 1 and error[0].startswith("error: ") and words in error[0], (args, error)
    jwt = doc_id("Ticket: Fix login. Sessions use JWT now.")[:8]
    for editor in ("false", str(tmp_path / "no-such-editor")):  # an editor that fails, or none there
        error = middle(workdir, "edit", jwt, ok=False, env={"EDITOR": editor, "VISUAL": editor}).stderr
        lines = error.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "--text TEXT" in lines[0], error
    assert "undid the supersede" in middle(workdir, "undo", "3").stdout
    history = middle(workdir, "history").stdout
    assert "undid change 3" in history and "[undone by 4]" in history and "edited" in history


@pytest.mark.parametrize("backend", ["hybrid", "hipporag"])
def test_search_explain_says_why_each_memory_was_recalled(workdir, backend):
    use_backend(workdir, backend)
    crash = "Ticket: Fix startup. The app_startup hook in datasette/app.py ran twice."
    middle(workdir, "add", crash)
    middle(workdir, "add", "Ticket: Export CSV. Streams rows from the orders table.")
    middle(workdir, "pin", doc_id(crash)[:8])
    lines = middle(workdir, "search", "startup hook of datasette/app.py", "--explain").stdout.splitlines()
    assert lines[0].endswith(crash)
    why = lines[1].strip()
    assert why.startswith("why: pinned; keywords startup, hook, datasette")
    assert "similarity 0." in why and re.search(r"\d{4}-\d\d-\d\d \(today\)", why)
    if backend == "hipporag":  # its graph path: the entity the query names, in this doc
        assert "graph: the query names `datasette app py`, which this doc mentions" in why


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["hipporag", "hindsight", "sliding_window", "hybrid"])
def test_reindex_moves_a_memory_from_sqlite_to_postgresql_and_back(workdir, pg_url, backend):
    use_backend(workdir, backend)
    docs = ["first memory about caching", "second memory about parsing"]
    for doc in docs:
        middle(workdir, "add", doc)
    on_pg = {"MIDDLE_MEMORY_URL": pg_url}
    assert middle(workdir, "list", env=on_pg).stdout == ""  # the database holds no store yet
    done = middle(workdir, "reindex", "--from", backend, "--from-url", "local", env=on_pg)
    assert done.stdout.strip() == f"reindexed 2 doc(s) from {backend} (local) into {backend}"
    assert [line[10:] for line in middle(workdir, "list", env=on_pg).stdout.splitlines()] == docs
    middle(workdir, "add", "third memory, written on PostgreSQL", env=on_pg)
    shown = pg_url.split("@")[-1]
    back = middle(workdir, "reindex", "--from", backend, "--from-url", pg_url)  # into SQLite again
    assert back.stdout.strip().startswith(f"reindexed 1 doc(s) from {backend} (postgresql://")
    assert shown in back.stdout and "2 already there" in back.stdout
    listed = [line[10:] for line in middle(workdir, "list").stdout.splitlines()]
    assert listed == [*docs, "third memory, written on PostgreSQL"]
    error = middle(workdir, "reindex", "--from", backend, "--from-url", "mysql://db/x", ok=False)
    assert error.stderr.strip().startswith("error: --from-url 'mysql' is neither 'local'")


def test_a_store_whose_header_is_garbage_says_one_way_out_and_it_works(workdir):
    """`reindex` once said to export and `export` to reindex: both say the file is damaged
    beyond reading, and the way out they name (move it away) starts the memory afresh."""
    middle(workdir, "add", "kept before the damage")
    store = workdir / ".middle" / "memory" / "demo" / "bm25.sqlite3"
    with store.open("r+b") as f:
        f.write(b"garbage header!!" * 6)
    said = []
    for args in (["export"], ["reindex", "--from", "bm25"], ["list"]):
        lines = middle(workdir, *args, ok=False).stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), lines
        said.append(lines[0])
    for line in said:
        assert "its header is not SQLite's, so nothing in it can be read" in line
        assert f"`mv {store} {store}.damaged`" in line and "to start the project's memory afresh" in line
    store.rename(f"{store}.damaged")  # as it says
    assert "added 1 doc" in middle(workdir, "add", "the first doc of the fresh memory").stdout
    assert middle(workdir, "list").stdout.count("\n") == 1
