"""TicketSourceContract: what every ticket source must do, as a pytest suite to subclass.

Use it from a plugin's tests::

    from orchestrator.plugin_api import TicketSourceContract

    class TestMySource(TicketSourceContract):
        source_class = MySource

        @pytest.fixture
        def backlog(self, tmp_path):
            return MyBacklog(tmp_path)  # a fake tracker holding the tickets the tests add

A backlog is where the tests put tickets for the source to find (a folder, a fake issue tracker):
`add(spec)` adds or replaces the ticket `spec.id`, `add_broken(name)` adds an entry the source
must refuse (its error names `name`), and `source(context)` opens the source on it, as
`source_class.open(options, context)` would. A tracker that numbers its entries itself (GitHub's
`gh-12`) also has `ticket_id(spec_id)`: the id the source gives the ticket added as `spec_id`. The tickets go
through the same checks and the same
store copy as `middle sync` (orchestrator.running.sync), into a real SQLite ticket store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from orchestrator.running.sync import load_from, store_loaded
from tickets.model import Ticket, TicketStatus
from tickets.source import SourceContext, TicketSource
from tickets.store import TicketStore

__all__ = ["Backlog", "TicketSourceContract", "TicketSpec"]


@dataclass(frozen=True)
class TicketSpec:
    """A ticket the tests ask the backlog to hold, in the words any source understands."""

    id: str
    title: str
    description: str = ""
    project: str = "proj"
    depends_on: tuple[str, ...] = field(default_factory=tuple)


class Backlog(Protocol):
    """Where the tests put tickets for the source under test; see the module docstring."""

    def add(self, spec: TicketSpec) -> None:
        """Hold `spec` (replacing the ticket of the same id)."""

    def add_broken(self, name: str) -> None:
        """Hold an entry the source cannot read as a ticket; its error names `name`."""

    def source(self, context: SourceContext) -> TicketSource:
        """The source under test, opened on this backlog."""


class TicketSourceContract:
    """Subclass as `Test...`, set `source_class` and provide a `backlog` fixture."""

    source_class: Any = None  # the class registered with register_ticket_sources
    supports_broken = True  # False: the source has no entry it cannot read (skips that test)

    @pytest.fixture
    def context(self, tmp_path: Path) -> SourceContext:
        project = tmp_path / "project"
        project.mkdir(exist_ok=True)
        return SourceContext(
            base_dir=tmp_path, tickets_dir=tmp_path / "tickets", project_path=project, max_ticket_chars=1_000
        )

    @pytest.fixture
    def store(self, tmp_path: Path):
        with TicketStore(tmp_path / "contract.sqlite3") as store:
            yield store

    @staticmethod
    def _id(backlog: Backlog, spec_id: str) -> str:
        """The id the source gives the ticket the tests added as `spec_id` (the same, unless it renumbers)."""
        return backlog.ticket_id(spec_id) if hasattr(backlog, "ticket_id") else spec_id

    def _load(self, backlog: Backlog, context: SourceContext):
        return load_from(backlog.source(context), context.max_ticket_chars)

    def test_the_class_can_be_registered(self):
        cls = self.source_class
        assert cls is not None, "set source_class to the class your plugin registers"
        assert isinstance(cls.kind, str) and cls.kind, "a source class names its kind ([tickets] kind)"
        assert isinstance(cls.argument, str), "`argument`: the option `--from KIND:ARG` sets"
        assert callable(getattr(cls, "open", None)), "a classmethod open(options, context)"

    def test_an_empty_backlog_loads_nothing(self, backlog: Backlog, context: SourceContext):
        loaded = self._load(backlog, context)
        assert loaded.tickets == [] and loaded.errors == []
        assert isinstance(loaded.where, str) and loaded.where

    def test_every_ticket_loads_with_its_fields(self, backlog: Backlog, context: SourceContext):
        backlog.add(TicketSpec("001-setup", "Set up", "Make the project."))
        backlog.add(TicketSpec("002-feature", "A feature — ünïcode ✓", "Body\nwith lines.", depends_on=("001-setup",)))
        loaded = self._load(backlog, context)
        assert loaded.errors == []
        by_id = {t.id: t for t in loaded.tickets}
        setup, feature = self._id(backlog, "001-setup"), self._id(backlog, "002-feature")
        assert sorted(by_id) == sorted([setup, feature])
        assert all(isinstance(t, Ticket) for t in loaded.tickets)
        assert by_id[feature].title == "A feature — ünïcode ✓"
        assert by_id[feature].description == "Body\nwith lines."
        assert by_id[feature].depends_on == [setup]
        assert by_id[setup].project_id == "proj"
        assert all(t.source for t in loaded.tickets), "each ticket says where it came from (`source`)"

    def test_each_load_reads_the_backlog_again(self, backlog: Backlog, context: SourceContext):
        source = backlog.source(context)
        assert load_from(source, context.max_ticket_chars).tickets == []
        backlog.add(TicketSpec("001-late", "Added after opening"))
        assert [t.id for t in load_from(source, context.max_ticket_chars).tickets] == [self._id(backlog, "001-late")]

    def test_a_broken_entry_is_an_error_and_hides_no_other_ticket(self, backlog: Backlog, context: SourceContext):
        if not self.supports_broken:
            pytest.skip("the source has no entry it cannot read (supports_broken = False)")
        backlog.add(TicketSpec("001-good", "Good"))
        backlog.add_broken("002-broken")
        loaded = self._load(backlog, context)
        assert [t.id for t in loaded.tickets] == [self._id(backlog, "001-good")]
        assert len(loaded.errors) == 1 and "002-broken" in str(loaded.errors[0])

    def test_a_ticket_over_max_ticket_chars_is_refused(self, backlog: Backlog, context: SourceContext):
        backlog.add(TicketSpec("001-short", "Short", "fits"))
        backlog.add(TicketSpec("002-long", "Long", "x" * (context.max_ticket_chars + 30)))
        loaded = self._load(backlog, context)
        assert [t.id for t in loaded.tickets] == [self._id(backlog, "001-short")]
        assert len(loaded.errors) == 1 and "max_ticket_chars" in loaded.errors[0].message

    def test_sync_stores_new_tickets_pending_and_keeps_status_on_change(
        self, backlog: Backlog, context: SourceContext, store
    ):
        backlog.add(TicketSpec("001-a", "First", "one"))
        tid = self._id(backlog, "001-a")
        first = store_loaded(store, self._load(backlog, context))
        assert first.new == [tid] and store.get_ticket(tid).status is TicketStatus.PENDING
        stamp = store.get_ticket(tid).updated_at
        again = store_loaded(store, self._load(backlog, context))
        assert again.new == [] and store.get_ticket(tid).updated_at == stamp  # unchanged: no write
        store.set_status(tid, TicketStatus.FAILED, "a past run")
        backlog.add(TicketSpec("001-a", "First, retitled", "one"))
        store_loaded(store, self._load(backlog, context))
        ticket = store.get_ticket(tid)
        assert ticket.title == "First, retitled" and ticket.status is TicketStatus.FAILED

    def test_an_unknown_dependency_is_reported(self, backlog: Backlog, context: SourceContext, store):
        backlog.add(TicketSpec("001-a", "Waits", depends_on=("999-nowhere",)))
        loaded = store_loaded(store, self._load(backlog, context))
        assert loaded.dependency_errors and self._id(backlog, "999-nowhere") in str(loaded.dependency_errors[0])
