"""kill -9 at every named point of the memory commands a person runs apart from a ticket's run
(`middle memory import`, `add`, `edit`, `supersede`, `delete`, `undo`: orchestrator.killpoints,
in_run=False), then the same command again: nothing lost (every doc once, its origin and its
change recorded, the undo still undoes), nothing duplicated, no lock left held.

Each case is a real `middle memory ...` process with MIDDLE_KILL_AT=<point>:<n>: it kills itself
(SIGKILL: no handler, no cleanup) there. The normal suite runs a case of each kind (an import,
a store write before its record, a record before its store write, one and bulk); `pytest -m
killsweep tests/cli/test_memory_killpoints.py` runs the others (the table in docs/runs.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_cli_helpers import middle
from test_memory_import import docs, history_repo

from orchestrator.config.settings import load_config
from orchestrator.killpoints import POINTS, VARIABLE
from orchestrator.memory.format import doc_id
from orchestrator.services import Services
from orchestrator.testing import make_repo

PROJECT = "demo"


@pytest.fixture
def root(tmp_path):
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        f'[project]\nid = "{PROJECT}"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "hybrid"\n[memory.options]\nembedder = "hashing"\n')
    return tmp_path


def killed(root: Path, at: str, *args: str) -> None:
    """`middle memory ARGS` with MIDDLE_KILL_AT=`at`: it must die there (SIGKILL)."""
    out = middle(root, *args, ok=False, env={VARIABLE: at})
    assert out.returncode == -9, f"`middle memory {' '.join(args)}` never passed {at}: {out.stderr}"


def recorded(root: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The project's curation states (by doc id) and its changes, oldest first."""
    with Services(load_config(str(root / "middle.toml"))) as svc:
        return dict(svc.store.memory_state(PROJECT)), list(reversed(svc.store.memory_changes(PROJECT)))


def once(root: Path) -> list[str]:
    stored = docs(root)
    assert len(stored) == len(set(stored)), stored
    return stored


def ident(text: str) -> str:
    return doc_id(text)[:8]


# -- imports ------------------------------------------------------------------------------------

def assert_every_commit_once_with_its_origin(root: Path, shas: list[str]) -> None:
    stored = once(root)
    assert sorted(d.split()[1] for d in stored) == sorted(s[:10] for s in shas)
    states, _ = recorded(root)
    origins = {s["doc"]: s["origin"] for s in states.values()}
    missing = [d[:40] for d in stored if (origins.get(d) or {}).get("kind") != "commit"]
    assert not missing, f"{len(missing)} imported commit(s) have no origin: {missing[:3]}"
    assert {origins[d]["commit"][:10] for d in stored} == {s[:10] for s in shas}


@pytest.mark.parametrize("at", ["import.indexed:2",
                                pytest.param("import.indexed:1", marks=pytest.mark.killsweep),
                                pytest.param("import.noted:1", marks=pytest.mark.killsweep)])
def test_a_git_import_killed_at_a_point_then_rerun_has_every_commit_once_with_its_origin(root, at):
    """The gap this closed: origins were recorded at the end of the import while the import
    record moved after every batch, so a kill after the first batch left its commits in memory
    with no origin, and the rerun (starting after the record) never read them again."""
    shas = history_repo(root / "big", 300)  # two batches of 256
    killed(root, at, "import", "git", "--repo", "big", "--no-progress")
    out = middle(root, "import", "git", "--repo", "big", "--no-progress")  # the import lock is free
    assert "new commit(s)" in out.stdout
    assert_every_commit_once_with_its_origin(root, shas)
    assert "nothing new to import" in middle(root, "import", "git", "--repo", "big", "--no-progress").stdout


@pytest.mark.killsweep
def test_a_notes_import_killed_after_its_batch_is_indexed_then_rerun_records_every_origin(root):
    notes = root / "notes.md"
    notes.write_text("".join(f"# Decision {i}\nWe chose option {i} for the parser.\n" for i in range(300)))
    killed(root, "import.indexed:1", "import", str(notes), "--no-progress")
    middle(root, "import", str(notes), "--no-progress")
    stored = once(root)
    assert len(stored) == 300
    states, _ = recorded(root)
    assert all((states[doc_id(d)]["origin"] or {}).get("path") == str(notes.resolve()) for d in stored)


# -- curation: a store write, then the record ---------------------------------------------------

TEXT = "The parser keeps tabs for indentation."
NEW = "The parser keeps four spaces for indentation."


def test_an_add_killed_before_its_change_is_recorded_is_recorded_by_the_same_add_again(root):
    """Killed between indexing and recording, the doc was in memory with no origin and no
    change, and `add` again said "already in memory": nothing could undo it."""
    killed(root, "memory.curated:1", "add", TEXT)
    assert "added" in middle(root, "add", TEXT).stdout
    assert once(root) == [TEXT]
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add"] and states[doc_id(TEXT)]["origin"] == {"kind": "hand"}
    assert "already in memory" in middle(root, "add", TEXT).stdout  # and only once
    middle(root, "undo", str(changes[0]["id"]))
    assert once(root) == []


@pytest.mark.killsweep
def test_a_supersede_killed_before_its_change_is_recorded_links_the_two_when_run_again(root):
    middle(root, "add", TEXT)
    killed(root, "memory.curated:1", "supersede", ident(TEXT), "--with", NEW)
    assert "superseded" in middle(root, "supersede", ident(TEXT), "--with", NEW).stdout
    assert sorted(once(root)) == sorted([TEXT, NEW])
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add", "supersede"]
    assert states[doc_id(TEXT)]["superseded_by"] == doc_id(NEW)
    assert states[doc_id(NEW)]["origin"] == {"kind": "supersede", "of": doc_id(TEXT)}
    middle(root, "undo", str(changes[1]["id"]))
    assert once(root) == [TEXT]


@pytest.mark.killsweep
@pytest.mark.parametrize("at", ["memory.curated:1", "memory.recorded:1"])
def test_an_edit_killed_at_a_point_is_finished_by_the_same_edit_and_undone_whole(root, at):
    """Killed after the new text was indexed (before: after the old one was deleted too), the
    edit had no change recorded: `edit` again found no doc, and undo had nothing to take back.
    Now the change is recorded before the old text is deleted, and the same edit finishes it."""
    middle(root, "add", TEXT)
    middle(root, "pin", ident(TEXT))
    killed(root, at, "edit", ident(TEXT), "--text", NEW)
    assert sorted(once(root)) == sorted([TEXT, NEW])  # both, never neither
    assert "edited" in middle(root, "edit", ident(TEXT), "--text", NEW).stdout
    assert once(root) == [NEW]
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add", "pin", "edit"]
    assert states[doc_id(NEW)]["pinned"] and doc_id(TEXT) not in states
    middle(root, "undo", str(changes[2]["id"]))
    assert once(root) == [TEXT]
    assert recorded(root)[0][doc_id(TEXT)]["pinned"]


@pytest.mark.killsweep
def test_an_undo_of_an_edit_killed_after_it_is_recorded_is_finished_by_the_same_undo(root):
    middle(root, "add", TEXT)
    middle(root, "edit", ident(TEXT), "--text", NEW)
    edit = recorded(root)[1][-1]["id"]
    killed(root, "memory.recorded:1", "undo", str(edit))
    assert sorted(once(root)) == sorted([TEXT, NEW])
    assert "undid the edit" in middle(root, "undo", str(edit)).stdout
    assert once(root) == [TEXT]
    assert [c["action"] for c in recorded(root)[1]] == ["add", "edit", "undo"]  # one undo recorded
    out = middle(root, "undo", str(edit), ok=False)  # whole now: a third time is the usual mistake
    assert out.stderr.startswith("error: ") and "undone already" in out.stderr


# -- curation: the record, then the store write --------------------------------------------------

def test_a_delete_killed_after_its_change_is_recorded_is_finished_by_the_same_delete_and_undone(root):
    """Deleting from the store first, a kill before the record lost the doc for good (no change
    to undo). Now the record (text, time, state) comes first and the same delete finishes."""
    middle(root, "add", TEXT)
    middle(root, "pin", ident(TEXT))
    killed(root, "memory.recorded:1", "delete", ident(TEXT))
    assert "deleted" in middle(root, "delete", ident(TEXT)).stdout
    assert once(root) == []
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add", "pin", "forget"]  # one delete recorded
    middle(root, "undo", str(changes[2]["id"]))
    assert once(root) == [TEXT]
    assert recorded(root)[0][doc_id(TEXT)]["pinned"]


NOTES = [f"The parser note {i}: keep rule {i}." for i in range(3)]


def test_a_bulk_delete_killed_after_its_change_is_recorded_is_finished_by_the_same_command(root):
    """Deleting first lost every picked doc for good when killed before the record."""
    for note in NOTES:
        middle(root, "add", note)
    killed(root, "memory.recorded:1", "delete", "--containing", "parser note", "--yes")
    assert sorted(once(root)) == sorted(NOTES)  # still there: the rerun finishes
    assert "deleted 3 docs" in middle(root, "delete", "--containing", "parser note", "--yes").stdout
    assert once(root) == []
    changes = recorded(root)[1]
    assert [c["action"] for c in changes] == ["add"] * 3 + ["bulk"]  # one bulk change
    middle(root, "undo", str(changes[-1]["id"]))
    assert sorted(once(root)) == sorted(NOTES)


@pytest.mark.killsweep
def test_a_bulk_supersede_killed_before_its_change_is_recorded_is_recorded_by_the_same_command(root):
    for note in NOTES:
        middle(root, "add", note)
    args = ("supersede", "--containing", "parser note", "--with", NEW, "--yes")
    killed(root, "memory.curated:1", *args)
    assert "superseded 3 docs" in middle(root, *args).stdout
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add"] * 3 + ["bulk"]
    assert all(states[doc_id(n)]["superseded_by"] == doc_id(NEW) for n in NOTES)
    middle(root, "undo", str(changes[-1]["id"]))
    assert sorted(once(root)) == sorted(NOTES)


# -- undo: a store write, then the record ------------------------------------------------------

def test_an_undo_of_a_supersede_killed_before_its_record_is_finished_by_the_same_undo(root):
    """Killed after the replacement was deleted, the undo was refused when run again ("its doc
    was changed since") while the old doc still pointed at a replacement no longer in memory."""
    middle(root, "add", TEXT)
    middle(root, "supersede", ident(TEXT), "--with", NEW)
    change = recorded(root)[1][-1]["id"]
    killed(root, "memory.removed:1", "undo", str(change))
    assert "undid the supersede" in middle(root, "undo", str(change)).stdout
    assert once(root) == [TEXT]
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add", "supersede", "undo"]
    assert states[doc_id(TEXT)]["superseded_by"] is None and doc_id(NEW) not in states


@pytest.mark.killsweep
@pytest.mark.parametrize("verb, at", [("add", "memory.removed:1"), ("delete", "memory.curated:1")])
def test_an_undo_killed_before_its_record_is_finished_by_the_same_undo(root, verb, at):
    middle(root, "add", TEXT)
    if verb == "delete":
        middle(root, "delete", ident(TEXT))
    change = recorded(root)[1][-1]["id"]
    killed(root, at, "undo", str(change))
    assert "undid the" in middle(root, "undo", str(change)).stdout
    assert once(root) == ([] if verb == "add" else [TEXT])
    assert [c["action"] for c in recorded(root)[1]][-1] == "undo"
    assert [c["action"] for c in recorded(root)[1]].count("undo") == 1


@pytest.mark.killsweep
@pytest.mark.parametrize("verb, at", [("supersede", "memory.removed:1"), ("delete", "memory.curated:1")])
def test_an_undo_of_a_bulk_change_killed_before_its_record_is_finished_by_the_same_undo(root, verb, at):
    for note in NOTES:
        middle(root, "add", note)
    middle(root, verb, "--containing", "parser note", *(["--with", NEW] if verb == "supersede" else []), "--yes")
    change = recorded(root)[1][-1]["id"]
    killed(root, at, "undo", str(change))
    middle(root, "undo", str(change))
    assert sorted(once(root)) == sorted(NOTES)
    states, changes = recorded(root)
    assert [c["action"] for c in changes] == ["add"] * 3 + ["bulk", "undo"]
    assert all(states.get(doc_id(n), {}).get("superseded_by") is None for n in NOTES)


def test_every_point_of_the_memory_commands_has_a_case_here():
    import re

    cases = set(re.findall(r'"([a-z]+\.[a-z]+):\d"', Path(__file__).read_text(encoding="utf-8")))
    memory_points = {p.name for p in POINTS if not p.in_run and p.name.split(".")[0] in ("import", "memory")}
    assert memory_points and memory_points <= cases, memory_points - cases
