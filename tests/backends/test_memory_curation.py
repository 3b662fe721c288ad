"""Curation (issue 31): show, edit, supersede, pin, forget and undo on every built-in backend, in
one process and across two, through a reindex and on PostgreSQL. The state lives in the ticket
store (tickets/curation.py), the docs in the backend's store (memory.curation.Curator)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.memory.curation import CurationError, Curator, MemoryDocNotFound, cli_user
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.format import doc_id
from orchestrator.plugins.manager import PluginRegistry
from tickets.store import TicketStore

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ["bm25", "dense", "hybrid", "hipporag", "hindsight", "sliding_window"]
EMBEDDER = {"dense", "hybrid", "hipporag", "hindsight"}
DEPLOY = "Ticket: Deploy. Deploys run on the quartz cluster every Tuesday morning."
EXPORT = "Ticket: Export. The CSV export streams rows from the orders table."
FIXED = "Ticket: Deploy. Deploys run on the granite cluster every Tuesday morning."
NEWER = "Ticket: Deploy. Deploys now run on Kubernetes, no longer on the granite cluster."
WHO = "tester@here"


def open_curator(root: Path, backend: str, url: str | None = None,
                 store_target: str | Path | None = None) -> tuple[Curator, TicketStore]:
    options = {"embedder": "hashing"} if backend in EMBEDDER else {}
    facade = MemoryFacade(root / "mem", backend, options, PluginRegistry(load_entry_points=False),
                          url=url)
    store = TicketStore(store_target or root / "middle.sqlite3")
    facade.state_source = store.memory_marks  # as Services wires them
    return Curator(facade, store), store


def texts(facade: MemoryFacade, query: str, k: int = 5) -> list[str]:
    return facade.retrieve("p", [query], k)[0]["docs"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_curation_on_every_backend(tmp_path, backend):
    curator, store = open_curator(tmp_path, backend)
    memory = curator.facade
    try:
        assert curator.add("p", DEPLOY, WHO).change == 1
        curator.add("p", EXPORT, WHO)
        # edit: the doc alone re-indexed; nothing derived from the old text is recalled again
        edited = curator.edit("p", doc_id(DEPLOY)[:8], FIXED, WHO)
        assert (edited.old, edited.doc) == (DEPLOY, FIXED)
        assert sorted(memory.list_docs("p")) == sorted([FIXED, EXPORT])
        assert not any("quartz" in t for t in texts(memory, "quartz cluster deploys"))
        assert any("granite" in t for t in texts(memory, "granite cluster deploys"))
        # supersede: the old one kept, right below its replacement, marked
        superseding = curator.supersede("p", doc_id(FIXED)[:8], NEWER, WHO)
        assert superseding.doc == NEWER and NEWER in memory.list_docs("p") and FIXED in memory.list_docs("p")
        if memory.backend_cls.recall == "relevance":
            result = memory.retrieve("p", ["granite cluster deploys Tuesday"], 3)[0]
            assert result["docs"].index(NEWER) == result["docs"].index(FIXED) - 1, result["docs"]
            mark = next(m for m in result["superseded"] if m.get("by_hand"))
            assert (result["docs"][mark["doc"]], result["docs"][mark["by"]]) == (FIXED, NEWER)
        with pytest.raises(CurationError, match="already superseded by"):
            curator.supersede("p", doc_id(FIXED)[:8], "a third wording", WHO)
        shown = curator.show("p", doc_id(FIXED)[:6])
        assert shown["superseded_by"]["doc"] == NEWER
        assert [c["action"] for c in shown["changes"]] == ["supersede", "edit", "add"]
        # pin: always in the block, within the budget
        curator.pin("p", doc_id(EXPORT)[:8], WHO)
        block = memory.format_block([], memory.retrieve("p", ["granite cluster"], 1), limit=1,
                                    project_id="p")
        assert EXPORT in block and len(block) <= memory.memories_budget_chars
        # forget, then undo every change back to the start
        gone = curator.forget("p", doc_id(EXPORT)[:8], WHO)
        assert EXPORT not in memory.list_docs("p")
        curator.undo("p", gone.change, WHO)
        assert EXPORT in memory.list_docs("p") and store.memory_state("p")[doc_id(EXPORT)]["pinned"]
        curator.undo("p", superseding.change, WHO)
        assert NEWER not in memory.list_docs("p") and not store.memory_state("p")[doc_id(FIXED)]["superseded_by"]
        curator.undo("p", edited.change, WHO)
        assert sorted(memory.list_docs("p")) == sorted([DEPLOY, EXPORT])
        with pytest.raises(CurationError, match="undone already"):
            curator.undo("p", edited.change, WHO)
        changes = store.memory_changes("p")
        assert [c["action"] for c in changes[:3]] == ["undo", "undo", "undo"]
        assert all(c["who"] == WHO and c["at"] for c in changes)
    finally:
        memory.close()
        store.close()


@pytest.mark.parametrize("ident, error, words", [
    ("", CurationError, "give the doc's id"),
    ("zz", MemoryDocNotFound, "no doc in project 'p' has exactly that text"),
    ("ab", MemoryDocNotFound, "is no doc id"),
    ("abcdef12", MemoryDocNotFound, "no doc in project 'p' has an id starting 'abcdef12'"),
])
def test_bad_ids_are_refused_and_change_nothing(tmp_path, ident, error, words):
    curator, store = open_curator(tmp_path, "bm25")
    try:
        curator.add("p", DEPLOY, WHO)
        for verb in (lambda: curator.edit("p", ident, "x", WHO), lambda: curator.pin("p", ident, WHO),
                     lambda: curator.supersede("p", ident, "x", WHO),
                     lambda: curator.forget("p", ident, WHO), lambda: curator.show("p", ident)):
            with pytest.raises(error, match=words):
                verb()
        for empty in ("", "   \n"):
            with pytest.raises(CurationError, match="the new text is empty"):
                curator.edit("p", doc_id(DEPLOY)[:8], empty, WHO)
        with pytest.raises(MemoryDocNotFound, match="no memory change 99"):
            curator.undo("p", 99, WHO)
        assert curator.facade.list_docs("p") == [DEPLOY] and len(store.memory_changes("p")) == 1
    finally:
        curator.facade.close()
        store.close()


def middle(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG")}
    env.update(MIDDLE_AGENT_CACHE_DIR=str(root / "cache"), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "memory", *args], cwd=root,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, (out.stdout, out.stderr)
    return out


def project(root: Path, backend: str) -> None:
    options = '[memory.options]\nembedder = "hashing"\n' if backend in EMBEDDER else ""
    (root / "middle.toml").write_text(
        f'[project]\nid = "p"\n[memory]\nsave_dir = "mem"\nbackend = "{backend}"\n{options}')


@pytest.mark.parametrize("backend", ["hybrid", "hipporag"])
def test_a_change_in_another_process_counts_at_this_process_s_next_recall(tmp_path, backend):
    """This process keeps its backend open and recalls; another process (`middle memory ...`)
    edits, supersedes and pins meanwhile: the next recall here reads every change."""
    project(tmp_path, backend)
    curator, store = open_curator(tmp_path, backend, store_target=tmp_path / ".middle" / "middle.sqlite3")
    memory = curator.facade
    try:
        curator.add("p", DEPLOY, WHO)
        curator.add("p", EXPORT, WHO)
        assert DEPLOY in texts(memory, "quartz cluster deploys")
        middle(tmp_path, "edit", doc_id(DEPLOY)[:8], "--text", FIXED)
        assert FIXED in texts(memory, "cluster deploys Tuesday") and DEPLOY not in memory.list_docs("p")
        middle(tmp_path, "supersede", doc_id(FIXED)[:8], "--with", NEWER)
        docs = texts(memory, "granite cluster deploys Tuesday", 3)
        assert docs.index(NEWER) == docs.index(FIXED) - 1, docs
        middle(tmp_path, "pin", doc_id(EXPORT)[:8])
        block = memory.format_block([], memory.retrieve("p", ["granite cluster"], 1), limit=1,
                                    project_id="p")
        assert EXPORT in block
        assert [c["action"] for c in store.memory_changes("p")][:3] == ["pin", "supersede", "edit"]
        # the person git knows in the project (else the login name and machine)
        assert store.memory_changes("p")[0]["who"] == cli_user(tmp_path)
    finally:
        memory.close()
        store.close()


def test_curation_survives_a_reindex(tmp_path):
    project(tmp_path, "hybrid")
    middle(tmp_path, "add", DEPLOY)
    middle(tmp_path, "add", EXPORT)
    middle(tmp_path, "edit", doc_id(DEPLOY)[:8], "--text", FIXED)
    middle(tmp_path, "supersede", doc_id(FIXED)[:8], "--with", NEWER)
    middle(tmp_path, "pin", doc_id(EXPORT)[:8])
    assert "rebuilt the hybrid store: 3 doc(s)" in middle(tmp_path, "reindex", "--from", "hybrid").stdout
    shown = middle(tmp_path, "show", doc_id(FIXED)[:8]).stdout
    assert f"superseded by: {doc_id(NEWER)[:8]}" in shown and "edited" in shown
    assert "pinned" in middle(tmp_path, "show", doc_id(EXPORT)[:8]).stdout
    out = middle(tmp_path, "search", "granite cluster deploys Tuesday", "-k", "3").stdout
    found = [line.strip().split("] ", 1)[1] for line in out.splitlines()  # "score  [id] doc"
             if re.match(r"^ *-?\d+\.\d{3}  ", line)]
    assert found.index(NEWER) == found.index(FIXED) - 1, found
    assert f"(superseded by {doc_id(NEWER)[:8]}: kept as history)" in out


@pytest.mark.postgres
def test_curation_with_the_ticket_store_and_memory_in_postgresql(tmp_path, pg_url):
    one, store_one = open_curator(tmp_path / "a", "hybrid", url=pg_url, store_target=pg_url)
    two, store_two = open_curator(tmp_path / "b", "hybrid", url=pg_url, store_target=pg_url)
    try:  # two machines: one curates, the other recalls
        one.add("p", DEPLOY, WHO)
        one.add("p", EXPORT, WHO)
        one.edit("p", doc_id(DEPLOY)[:8], FIXED, WHO)
        one.supersede("p", doc_id(FIXED)[:8], NEWER, WHO)
        one.pin("p", doc_id(EXPORT)[:8], WHO)
        docs = texts(two.facade, "granite cluster deploys Tuesday", 3)
        assert docs.index(NEWER) == docs.index(FIXED) - 1, docs
        assert EXPORT in two.facade.format_block([], two.facade.retrieve("p", ["granite"], 1),
                                                 limit=1, project_id="p")
        assert [c["action"] for c in store_two.memory_changes("p")][:3] == ["pin", "supersede", "edit"]
        two.undo("p", store_two.memory_changes("p")[2]["id"], WHO)  # the edit, from the other machine
        assert DEPLOY in one.facade.list_docs("p") and FIXED not in one.facade.list_docs("p")
    finally:
        for curator, store in ((one, store_one), (two, store_two)):
            curator.facade.close()
            store.close()


def test_a_doc_nothing_records_is_never_taken_as_a_verb_s_own(tmp_path):
    """A doc another program indexed (the raw API, a script writing the store) has no state: an
    `add`, `supersede --with` or `edit` to the same words is refused as already in memory, never
    recorded as this person's change, whose undo would then delete the other program's doc. Only a
    doc a verb marked before indexing it (killed before recording) is taken (test_memory_killpoints)."""
    curator, store = open_curator(tmp_path, "bm25")
    try:
        curator.facade.index("p", [DEPLOY])  # no verb: nothing records it
        curator.add("p", EXPORT, WHO)
        added = curator.add("p", DEPLOY, WHO)
        assert added.change is None and added.message == "already in memory: nothing added"
        with pytest.raises(CurationError, match="in memory already"):
            curator.supersede("p", doc_id(EXPORT)[:8], DEPLOY, WHO)
        with pytest.raises(CurationError, match="has that text already"):
            curator.edit("p", doc_id(EXPORT)[:8], DEPLOY, WHO)
        assert [c["action"] for c in store.memory_changes("p")] == ["add"]  # EXPORT's alone
        assert sorted(curator.facade.list_docs("p")) == sorted([DEPLOY, EXPORT])
        # and a finished verb leaves no mark behind: an edit of a doc with no state (a ticket's)
        curator.facade.index("p", [FIXED])
        curator.edit("p", doc_id(FIXED)[:8], NEWER, WHO)
        assert not curator._unrecorded("p", NEWER)
        assert doc_id(NEWER) not in store.memory_state_for("p", {doc_id(NEWER)})
    finally:
        curator.facade.close()
        store.close()


def test_many_pins_leave_room_for_what_the_query_finds(tmp_path):
    """A team's pins (here 15 rules of 150 characters: more than the block's budget) go first
    within half of the related part; the doc the query finds, and a supersede just made of it,
    still reach the agent's block, and the pins past the share are counted as not shown."""
    curator, store = open_curator(tmp_path, "bm25")
    memory = curator.facade
    try:
        rules = [f"Rule {k}: every handler in package p{k} logs its request id, user id and the time "
                 f"it took, and returns errors as JSON objects with a code and a message." for k in range(15)]
        for rule in rules:
            curator.add("p", rule, WHO)
            curator.pin("p", doc_id(rule)[:8], WHO)
        curator.add("p", FIXED, WHO)
        curator.supersede("p", doc_id(FIXED)[:8], NEWER, WHO)
        results = memory.retrieve("p", ["granite cluster deploys Tuesday"], 5)
        for recent in ([], [("Ticket: Other. A recent ticket about the invoices page.", "2026-11-20")]):
            block = memory.block("p", recent, results, limit=5)
            assert NEWER in block.related and FIXED in block.related, block.text
            assert block.related.index(FIXED) == block.related.index(NEWER) + 1  # history, right below
            assert block.related[0] == rules[0]  # the oldest pin first
            assert "more memories not shown" in block.text and len(block.text) <= memory.memories_budget_chars
        few = memory.block("p", [], memory.retrieve("p", ["invoices"], 5), limit=5)
        assert few.related[:2] == rules[:2]  # pins within the share still come first
        asked = memory.block("p", [], memory.retrieve("p", ["package p14 handlers"], 5), limit=5)
        assert asked.related[0] == rules[14]  # a pin the query finds goes before the other pins
    finally:
        memory.close()
        store.close()
