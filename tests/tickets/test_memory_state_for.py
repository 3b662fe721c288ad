"""The keyed read of memory curation states (MemoryCuration.memory_state_for, Curator.states with
ids): a show or a curation verb reads its few docs' rows, not the project's every row, on SQLite
and on PostgreSQL, and answers supersede questions as the full read does."""

from __future__ import annotations

import sqlite3

from orchestrator.memory.curation import Curator, _moved, replacement
from tickets.store import SCHEMA_VERSION, TicketStore


def _state(key: str, by: str | None = None, pinned: bool = False) -> dict:
    return {"doc_id": key, "doc": f"doc {key}", "pinned": pinned, "superseded_by": by,
            "origin": {"kind": "hand"}, "added_by": "me", "added_at": "2026-01-01T00:00:00+00:00",
            "valid_until": None}


def _ids(*names: str) -> list[str]:
    return [name * 16 for name in names]  # 64 hex characters, as a doc id


def _fill(store: TicketStore) -> tuple[str, str, str, str, str]:
    """a -> b -> c (a superseded by b, b by c), x superseded by a, plus 300 rows not linked to
    them and a row of another project with a's id."""
    a, b, c, x, other = _ids("a", "b", "c", "d", "e")
    rows = [_state(a, b), _state(b, c), _state(c, pinned=True), _state(x, a)]
    rows += [_state(f"{i:064x}", pinned=i % 2 == 0) for i in range(300)]
    store.record_memory_change("p", "pin", a, who="me", put=rows)  # type: ignore[arg-type]
    store.record_memory_change("q", "pin", a, who="me", put=[_state(a, other)])  # type: ignore[list-item]
    return a, b, c, x, other


def test_the_keyed_read_gives_the_docs_and_the_ones_they_supersede(store_target):
    with TicketStore(store_target) as store:
        a, b, c, x, _ = _fill(store)
        assert set(store.memory_state_for("p", [a])) == {a, x}  # its own row, and x it supersedes
        assert set(store.memory_state_for("p", [c, "f" * 64])) == {c, b}  # an unknown id: nothing
        assert store.memory_state_for("p", []) == {}
        assert store.memory_state_for("p", [a])[a] == store.memory_state("p")[a]
        assert store.memory_state_for("q", [a])[a]["superseded_by"] == _ids("e")[0]  # per project


def test_curator_states_follow_the_chain_and_answer_as_the_full_read(store_target):
    with TicketStore(store_target) as store:
        a, b, c, x, _ = _fill(store)
        curator = Curator(None, store)  # type: ignore[arg-type]  # states() reads the ticket store only
        everything = curator.states("p")
        some = curator.states("p", [x])
        assert len(everything) == 304
        assert {x, a, b, c} <= set(some) and len(some) <= 5  # the chain, not the 300 others
        for key in (x, a, b, c):
            assert replacement(some, key) == replacement(everything, key)
            assert _moved(some, key, "new text") == _moved(everything, key, "new text")


def test_a_circle_of_supersede_links_ends(store_target):
    """Stored state is untrusted: a -> b -> a (written by hand) does not loop the reader."""
    a, b = _ids("a", "b")
    with TicketStore(store_target) as store:
        store.record_memory_change("p", "pin", a, who="me", put=[_state(a, b), _state(b, a)])  # type: ignore[list-item]
        assert set(Curator(None, store).states("p", [a])) == {a, b}  # type: ignore[arg-type]


def test_sqlite_reads_superseding_rows_by_their_index(tmp_path):
    path = tmp_path / "t.db"
    with TicketStore(path) as store:
        _fill(store)
    conn = sqlite3.connect(path)
    plan = " ".join(str(r) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM memory_state WHERE project_id = ? AND superseded_by IN (?)",
        ("p", "x")))
    conn.close()
    assert "memory_state_by_replacement" in plan, plan


def test_a_version_15_store_gains_the_index(tmp_path):
    """Schema 15 -> 16: the index memory_state_by_replacement, the rows kept."""
    path = tmp_path / "t.db"
    with TicketStore(path) as store:
        a, *_ = _fill(store)
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX memory_state_by_replacement")
    conn.execute("UPDATE schema_version SET version = 15")
    conn.commit()
    conn.close()
    with TicketStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert set(store.memory_state_for("p", [a])) == {a, _ids("d")[0]}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_state_by_replacement'").fetchone()
    conn.close()


def test_changes_are_cut_and_picked_by_the_database(store_target):
    """A history page reads its newest changes only, and following a doc's edits reads the
    edits only (memory_changes' limit and action), on SQLite and PostgreSQL."""
    a, b = _ids("a", "b")
    with TicketStore(store_target) as store:
        ids = [store.record_memory_change("p", "pin" if i % 2 else "edit", a, who="me",
                                          after={"doc_id": b}) for i in range(6)]
        store.record_memory_change("q", "edit", a, who="me")
        assert [c["id"] for c in store.memory_changes("p", limit=2)] == ids[:-3:-1]
        edits = store.memory_changes("p", action="edit")
        assert [c["id"] for c in edits] == ids[-2::-2] and all(c["project_id"] == "p" for c in edits)
        assert len(store.memory_changes("p", doc_ids=[b], limit=3)) == 3  # named by its after


def test_the_marks_a_recall_reads_leave_out_origin_only_rows(store_target):
    """What every recall reads (MemoryCuration.memory_marks): pins, supersede links (with the
    replacements they name), expiry; not the row an import gives every doc to say where it came
    from (10,000 of those at 100,000 docs made each read 0.4 to 1 s, three reads a turn)."""
    with TicketStore(store_target) as store:
        a, b, c, x, _ = _fill(store)
        new, old, expiring = _ids("7", "8", "9")
        origin_only = [_state(f"f{i:063x}") for i in range(200)]  # an import's rows
        store.record_memory_change("p", "pin", a, who="me", put=[
            *origin_only, _state(new), _state(old, new), {**_state(expiring), "valid_until": "2020-01-01"}])
        marks = store.memory_marks("p")
        everything = store.memory_state("p")
        assert len(everything) == 304 + 203
        assert not set(marks) & {row["doc_id"] for row in origin_only}
        assert {a, b, c, x, old, new, expiring} <= set(marks)  # new: origin only, but a replacement
        assert all(marks[key] == everything[key] for key in marks)
        for key in (x, a, b, c, old):  # supersede chains answer as from every row
            assert replacement(marks, key) == replacement(everything, key)
        pinned = {k for k, s in everything.items() if s["pinned"]}
        assert pinned <= set(marks)
        assert set(store.memory_marks("q")) == {a}  # per project
