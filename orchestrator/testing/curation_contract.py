"""CurationContract: a person's fix reaches the next ticket, whatever the backend.

Part of `MemoryBackendContract`. The backend is driven as a project's memory is (the memory
facade over a real ticket store, `memory.curation.Curator`); after each supersede, edit, pin
and undo, the memories block the next ticket's agent would read (one retrieve of its start
query, laid out as the graph lays it out) must say what the fix says: the replacement shown,
and the old rule never shown without "superseded by"; the edited text and never the old; the
pinned doc; and after an undo, what was there before. A recency backend gets a full window
first, so the rule sits in its summary rather than among the newest docs shown whole.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import pytest

from orchestrator.memory.format import DOC_ID_CHARS, doc_id
from orchestrator.plugins.hookspecs import hookimpl
from orchestrator.plugins.memory_backend import MemoryBackend

__all__ = ["CurationContract"]

PROJECT = "p"
WHO = "contract@test"
RULE = "Decision: deploys run on the QUARTZ7 cluster, decided by the ops team."
# The replacement shares no word with the query: people's link, not its words, must bring it.
NEW = "Releases now ship from the GRANITE9 servers, per the ops team."
EDITED = "Releases now ship from the GRANITE11 servers, per the ops team."
QUERY = "Which cluster do deploys run on? QUARTZ7 cluster deploys decision"
PINNED = "Convention: every log line is JSON with a TRACEID field."
FILLER = "Ticket {n}: tidied module m{n} with small fixes."


def _short(text: str) -> str:
    return doc_id(text)[:DOC_ID_CHARS]


class CurationContract:
    """Curation through the facade; needs `backend_factory` (see MemoryBackendContract)."""

    stores_docs: bool
    supports_delete: bool
    supports_list_docs: bool
    relevance_ranked: bool

    def _memory(self, factory: Callable[[Path], MemoryBackend], root: Path) -> tuple[Any, Any]:
        from orchestrator.memory.curation import Curator
        from orchestrator.memory.facade import MemoryFacade
        from orchestrator.plugins.manager import PluginRegistry
        from tickets.store import TicketStore

        probe = factory(root / "probe")
        cls, options = type(probe), probe.options.model_dump()
        if hasattr(probe.options, "background"):
            options["background"] = False  # summaries in the caller's thread: the block is settled
        probe.close()
        registry = PluginRegistry(load_entry_points=False)
        if registry.backends.get(cls.name) is None or registry.backends[cls.name].cls is not cls:
            registry = PluginRegistry(load_entry_points=False, extra_plugins=(_Registers(cls),))
        facade = MemoryFacade(root / "mem", cls.name, options, registry)
        store = TicketStore(root / "tickets.sqlite3")
        facade.state_source = store.memory_marks  # as Services wires them
        return Curator(facade, store), store

    def _block(self, curator: Any) -> str:
        memory = curator.facade
        results = memory.retrieve(PROJECT, [QUERY], memory.num_to_retrieve)
        return memory.block(PROJECT, [], results, limit=memory.num_to_retrieve).text

    def test_curation_reaches_the_next_block(self, backend_factory, tmp_path: Path) -> None:
        for flag in ("stores_docs", "supports_delete", "supports_list_docs"):
            if not getattr(self, flag):
                pytest.skip(f"backend declares {flag} = False")
        curator, store = self._memory(backend_factory, tmp_path)
        try:
            self._check(curator, store)
        finally:
            curator.facade.close()
            store.close()

    def _check(self, curator: Any, store: Any) -> None:
        # Older docs, the rule, newer docs: a recency backend's window is full, the rule in it.
        for n in range(10):
            curator.add(PROJECT, FILLER.format(n=n), WHO)
        curator.add(PROJECT, PINNED, WHO)
        curator.add(PROJECT, RULE, WHO)
        for n in range(10, 15):
            curator.add(PROJECT, FILLER.format(n=n), WHO)
        block = self._block(curator)
        if self.relevance_ranked:
            assert "QUARTZ7" in block, block

        superseded = curator.supersede(PROJECT, _short(RULE), NEW, WHO)
        block = self._block(curator)
        assert "GRANITE9" in block, f"the replacement is not in the next block:\n{block}"
        if self.relevance_ranked:  # the old rule matched the query: kept below it, as history
            assert "QUARTZ7" in block, f"the superseded doc left the block:\n{block}"
        _only_marked(block, "QUARTZ7", f"superseded by [{_short(NEW)}]")

        times = _records(curator)
        edited = curator.edit(PROJECT, _short(NEW), EDITED, WHO)
        block = self._block(curator)
        assert "GRANITE11" in block and "GRANITE9" not in block, block
        _only_marked(block, "QUARTZ7", f"superseded by [{_short(EDITED)}]")
        if curator.facade.backend_cls.keeps_times:  # an edit keeps the doc's time and place
            after = _records(curator)
            assert after[EDITED] == times[NEW]
            order = [t for t, _ in sorted(after.items(), key=lambda x: x[1] or 0.0)]
            assert order.index(EDITED) == sorted(times, key=lambda t: times[t] or 0.0).index(NEW)

        pinned = curator.pin(PROJECT, _short(PINNED), WHO)
        block = self._block(curator)
        assert "TRACEID" in block, f"a pinned doc is not in the next block:\n{block}"

        curator.undo(PROJECT, edited.change, WHO)
        block = self._block(curator)
        assert "GRANITE9" in block and "GRANITE11" not in block, block
        curator.undo(PROJECT, superseded.change, WHO)
        block = self._block(curator)
        assert "GRANITE9" not in block and "superseded by" not in block, block
        if self.relevance_ranked:
            assert "QUARTZ7" in block, block
        curator.undo(PROJECT, pinned.change, WHO)
        assert not store.memory_state(PROJECT)[doc_id(PINNED)]["pinned"]
        every_id = set(re.findall(r"\[([0-9a-f]{8})[\],]", block))
        assert every_id, block
        for ident in every_id:  # every id the block shows can be shown
            assert curator.show(PROJECT, ident)["short_id"] == ident


def _records(curator: Any) -> dict[str, float | None]:
    with curator.facade.using(PROJECT, "lookup") as backend:
        return dict(backend.list_records())


def _only_marked(block: str, word: str, mark: str) -> None:
    """Every line of the block that states the old rule says it was superseded, and by which."""
    for line in block.splitlines():
        if word in line:
            assert mark in line, f"the superseded rule is shown unmarked: {line!r}\n{block}"


class _Registers:
    """A plugin registering one backend class (a plugin's backend in a bare registry)."""

    def __init__(self, cls: type[MemoryBackend]):
        self.cls = cls

    @hookimpl
    def register_memory_backends(self, register: Callable[[type], None]) -> None:
        register(self.cls)
