"""Two docs whose ids share their first 10 characters (as 3 pairs did at 100,075 docs): the agent's
block shows each with the shortest id that tells it from every other doc in the store (11
characters here, as git shortens a hash), and an ambiguous id given to the CLI or the API is one
`error:` line naming both candidates; a longer id acts on its own doc alone."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from orchestrator.bench.memory_page import PROJECT, bench_project
from orchestrator.memory.curation import CurationError, Curator
from orchestrator.memory.facade import MemoryFacade
from orchestrator.memory.format import doc_id
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.server import create_app
from tickets.store import TicketStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from memory_cli_helpers import middle  # noqa: E402

# Found by hashing "Rule N: ..." for N up to 304,662: their SHA-256 ids start "275260b802".
A = "Rule 185798: deploys wait for the release check."
B = "Rule 304662: deploys wait for the release check."
SHARED = "275260b802"
OTHERS = [f"Ticket {n}: tidied module m{n}, the release check passes." for n in range(40)]


def test_the_pair_shares_ten_characters():
    assert doc_id(A)[:10] == doc_id(B)[:10] == SHARED and doc_id(A)[10] != doc_id(B)[10]


@pytest.mark.parametrize("backend", ["bm25", "sliding_window"])
def test_the_block_shows_ids_that_tell_the_two_apart(tmp_path, backend):
    mem = MemoryFacade(tmp_path / "mem", backend, {}, PluginRegistry(load_entry_points=False))
    store = TicketStore(tmp_path / "tickets.sqlite3")
    try:
        mem.state_source = store.memory_marks
        mem.index("p", OTHERS + [A, B])
        block = mem.block("p", [], mem.retrieve("p", ["deploys wait for the release check"], 10), limit=10).text
        a, b = doc_id(A)[:11], doc_id(B)[:11]
        assert f"[{a}] {A}" in block and f"[{b}] {B}" in block
        assert f"[{SHARED[:8]}]" not in block
        assert re.search(r"\[[0-9a-f]{8}\]", block)  # a doc no other shares 8 with keeps 8
        # the id shown names the doc alone; the 8 characters are refused, naming both
        curator = Curator(mem, store)
        assert curator.find("p", a) == A and curator.find("p", b) == B
        with pytest.raises(CurationError) as refused:
            curator.find("p", SHARED[:8])
        assert a in str(refused.value) and b in str(refused.value) and "\n" not in str(refused.value)
    finally:
        mem.close()
        store.close()


def test_a_superseded_note_names_the_replacement_by_its_longer_id(tmp_path):
    mem = MemoryFacade(tmp_path / "mem", "bm25", {}, PluginRegistry(load_entry_points=False))
    store = TicketStore(tmp_path / "tickets.sqlite3")
    try:
        mem.state_source = store.memory_marks
        curator = Curator(mem, store)
        mem.index("p", OTHERS + [B])
        old = "Rule: deploys wait for the release check on Fridays."
        curator.add("p", old, "tester")
        # B replaces it (B is in the store already: the supersede names it as the replacement)
        mem.delete("p", [B])
        curator.supersede("p", doc_id(old)[:8], B, "tester")
        mem.index("p", [A])
        block = mem.block("p", [], mem.retrieve("p", ["deploys wait for the release check Fridays"], 10),
                          limit=10).text
        assert f"superseded by [{doc_id(B)[:11]}]" in block
    finally:
        mem.close()
        store.close()


def test_cli_and_api_refuse_an_ambiguous_id_naming_the_candidates(tmp_path):
    config = bench_project(tmp_path)
    app = create_app(config)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        app.state.middle.memory().index(PROJECT, [A, B])
        answer = client.get(f"/api/projects/{PROJECT}/memory/docs/{SHARED[:8]}")
        assert answer.status_code in (400, 409), answer.text
        said = str(answer.json())
        assert doc_id(A)[:11] in said and doc_id(B)[:11] in said
        assert client.get(f"/api/projects/{PROJECT}/memory/docs/{doc_id(B)[:11]}").json()["doc"] == B
    refused = middle(tmp_path, "delete", SHARED[:8], ok=False)
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), refused.stderr
    assert doc_id(A)[:11] in lines[0] and doc_id(B)[:11] in lines[0] and "Rule 185798" in lines[0]
    middle(tmp_path, "delete", doc_id(A)[:11])
    shown = middle(tmp_path, "show", SHARED[:8]).stdout  # one doc has that prefix now
    assert B in shown
