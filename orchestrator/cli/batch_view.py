"""How `middle run` shows a batch: one ticket at a time as before, or N at once readably.

One ticket at a time prints its steps under a header line. Several at once print one status line
per running ticket: a rich live display on a terminal, plain `[ticket-id] ...` lines when piped
(so a log file stays greppable). Each finished ticket gets its result line either way.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.live import Live
from rich.table import Table

from orchestrator.cli.output import console, on_event, report, safe, say


def _event_line(event: dict[str, Any]) -> str | None:
    """A one-line summary of a Claude Code progress event (tool calls and first text lines)."""
    kind = event.get("type")
    if kind == "tool_use":
        inp = event.get("input") or {}
        target = inp.get("file_path") or inp.get("command") or inp.get("pattern") or ""
        return f"▸ {event.get('name')} {str(target)[:80]}"
    if kind == "text" and str(event.get("text", "")).strip():
        return str(event["text"]).strip().splitlines()[0][:100]
    return None


def _cut(text: str, width: int) -> str:
    """At most `width` terminal cells (wide characters count twice), ending with "…" when cut."""
    text = " ".join(str(text).split())
    return text if cell_len(text) <= width else set_cell_size(text, width - 1) + "…"


class SequentialView:
    """One ticket at a time: the output `middle run` always had."""

    def started(self, ticket: Any) -> None:
        console.print(f"[bold]ticket {safe(ticket.id)}[/]: {safe(ticket.title)}")

    def say(self, ticket_id: str, msg: str) -> None:
        say(msg)

    def event(self, ticket_id: str, event: dict[str, Any]) -> None:
        on_event(event)

    def finished(self, outcome: Any) -> None:
        report(outcome)

    def close(self) -> None:
        pass


class PrefixedView:
    """Several tickets at once, piped: every line names its ticket."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def _line(self, ticket_id: str, text: str) -> None:
        with self._lock:
            console.print(f"[bold]\\[{safe(ticket_id)}][/] {text}")

    def started(self, ticket: Any) -> None:
        self._line(ticket.id, f"started: {safe(ticket.title)}")

    def say(self, ticket_id: str, msg: str) -> None:
        self._line(ticket_id, safe(msg))

    def event(self, ticket_id: str, event: dict[str, Any]) -> None:
        line = _event_line(event)
        if line:
            self._line(ticket_id, f"[dim]{safe(line)}[/]")

    def finished(self, outcome: Any) -> None:
        with self._lock:
            report(outcome, prefix=f"[bold]\\[{safe(outcome.ticket_id)}][/] ")

    def close(self) -> None:
        pass


class LiveView:
    """Several tickets at once on a terminal: a live table, one line per running ticket."""

    def __init__(self, out: Console | None = None) -> None:
        self._console = out or console
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {}
        self._live = Live(self._table(), console=self._console, refresh_per_second=4, transient=True)
        self._live.start()

    def _table(self) -> Table:
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, style="dim")
        table.add_column(no_wrap=True)
        # The ids are shown whole (two rows must never both read `001-…`); the message gets
        # what is left of the line, cut here because rich would shrink every column alike.
        id_width = max((cell_len(tid) for tid in self._rows), default=0)
        room = max(self._console.width - id_width - len(" 0000s "), 10)
        for tid, row in self._rows.items():
            table.add_row(f"[bold]{safe(tid)}[/]", f"{time.monotonic() - row['since']:5.0f}s",
                          safe(_cut(row["text"], room)))
        return table

    def _set(self, ticket_id: str, text: str) -> None:
        with self._lock:
            if ticket_id in self._rows:
                self._rows[ticket_id]["text"] = text
            self._live.update(self._table())

    def started(self, ticket: Any) -> None:
        with self._lock:
            self._rows[ticket.id] = {"since": time.monotonic(), "text": f"started: {ticket.title}"}
            self._live.update(self._table())

    def say(self, ticket_id: str, msg: str) -> None:
        self._set(ticket_id, msg)

    def event(self, ticket_id: str, event: dict[str, Any]) -> None:
        line = _event_line(event)
        if line:
            self._set(ticket_id, line)

    def finished(self, outcome: Any) -> None:
        with self._lock:
            self._rows.pop(outcome.ticket_id, None)
            self._live.update(self._table())
            report(outcome)  # printed above the live lines

    def close(self) -> None:
        self._live.stop()


def make_view(parallel: int) -> Any:
    if parallel <= 1:
        return SequentialView()
    return LiveView() if console.is_terminal else PrefixedView()
