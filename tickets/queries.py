"""Read-only aggregates over the ticket store for the board, the memory page and the event streams.

Nothing is cached: every call reads the store, so a `middle run` in another process shows up on the
next request. The SQL keeps to what SQLite and PostgreSQL both speak (`runs.offline` is compared
with 0/1, never used as a boolean). Costs count real spending only: a run on the built-in fake model (`runs.offline`)
is counted apart, as a number of offline runs, never as money.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, time, timezone
from typing import TYPE_CHECKING, Any, TypedDict

# Ticket statuses the board counts as done: the work is finished (merged is complete and in).
DONE_STATUSES = ("complete", "merged")


class TicketStats(TypedDict):
    turns: int
    cost_usd: float  # real spending only
    runs: int
    offline_runs: int
    last_event_at: str | None


class ProjectTotals(TypedDict):
    project: str
    tickets: int
    done: int
    failed: int
    running: int
    pending: int
    cost_today_usd: float  # real spending only, since midnight UTC
    cost_total_usd: float
    offline_runs: int


class DocSource(TypedDict):
    ticket_id: str
    run_id: str | None  # the run that indexed it (None: recorded before runs were)
    indexed_at: str
    deleted_at: str | None


def today_start_utc() -> str:
    """Midnight UTC today, in the store's timestamp format (so text comparison orders it)."""
    midnight = datetime.combine(datetime.now(timezone.utc).date(), time(0), tzinfo=timezone.utc)
    return midnight.isoformat(timespec="microseconds")


def _no_stats() -> TicketStats:
    return {"turns": 0, "cost_usd": 0.0, "runs": 0, "offline_runs": 0, "last_event_at": None}


class TicketQueries:
    """Aggregate queries of TicketStore (needs its `_read`)."""

    if TYPE_CHECKING:  # provided by TicketStore, which this mixin is part of
        def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]: ...

    def ticket_stats(self) -> dict[str, TicketStats]:
        """Per ticket: turns and real cost over all its runs, its runs (and how many were offline)
        and the time of its last event."""
        stats: dict[str, TicketStats] = defaultdict(_no_stats)
        for row in self._read(
                "SELECT r.ticket_id, COUNT(DISTINCT r.id) AS runs,"
                " COUNT(DISTINCT CASE WHEN r.offline = 1 THEN r.id END) AS offline_runs,"
                " COUNT(t.turn_no) AS turns,"
                " COALESCE(SUM(CASE WHEN r.offline = 1 THEN 0 ELSE t.cost_usd END), 0) AS cost"
                " FROM runs r LEFT JOIN turns t ON t.run_id = r.id GROUP BY r.ticket_id"):
            stats[row["ticket_id"]] = {"turns": row["turns"], "cost_usd": float(row["cost"]), "runs": row["runs"],
                                       "offline_runs": row["offline_runs"], "last_event_at": None}
        for row in self._read("SELECT ticket_id, MAX(at) AS at FROM run_events GROUP BY ticket_id"):
            stats[row["ticket_id"]]["last_event_at"] = row["at"]
        return dict(stats)

    def project_totals(self) -> list[ProjectTotals]:
        """Per project: tickets by status (complete and merged are both done), real cost today
        (UTC) and all time, and the number of offline runs; sorted by project id."""
        totals: dict[str, ProjectTotals] = {}

        def entry(pid: str) -> ProjectTotals:
            return totals.setdefault(pid, {"project": pid, "tickets": 0, "done": 0, "failed": 0,
                                           "running": 0, "pending": 0, "cost_today_usd": 0.0,
                                           "cost_total_usd": 0.0, "offline_runs": 0})

        for row in self._read(
                "SELECT project_id, status, COUNT(*) AS n FROM tickets GROUP BY project_id, status"):
            e, status, n = entry(row["project_id"]), row["status"], row["n"]
            e["tickets"] += n
            if status in DONE_STATUSES:
                e["done"] += n
            elif status == "failed":
                e["failed"] += n
            elif status == "running":
                e["running"] += n
            elif status == "pending":
                e["pending"] += n
        for row in self._read(
                "SELECT tk.project_id, COALESCE(SUM(t.cost_usd), 0) AS total,"
                " COALESCE(SUM(CASE WHEN t.started_at >= ? THEN t.cost_usd ELSE 0 END), 0) AS today"
                " FROM turns t JOIN runs r ON r.id = t.run_id JOIN tickets tk ON tk.id = r.ticket_id"
                " WHERE r.offline = 0 GROUP BY tk.project_id", (today_start_utc(),)):
            e = entry(row["project_id"])
            e["cost_total_usd"], e["cost_today_usd"] = float(row["total"]), float(row["today"])
        for row in self._read(
                "SELECT tk.project_id, COUNT(*) AS n FROM runs r JOIN tickets tk ON tk.id = r.ticket_id"
                " WHERE r.offline = 1 GROUP BY tk.project_id"):
            entry(row["project_id"])["offline_runs"] = row["n"]
        return [totals[k] for k in sorted(totals)]

    def doc_sources(self, project_id: str, doc: str | None = None) -> dict[str, list[DocSource]]:
        """For each doc text indexed by a ticket of the project (only `doc`, when given: the
        database picks its rows, a show does not read the whole project's): which tickets
        (each once, the latest record first wins), when, and whether a revert deleted it."""
        sources: dict[str, dict[str, DocSource]] = defaultdict(dict)
        only, params = ("", (project_id,)) if doc is None else (" AND doc = ?", (project_id, doc))
        for row in self._read(
                "SELECT doc, ticket_id, run_id, created_at, deleted_at FROM memory_docs"
                f" WHERE project_id = ?{only} ORDER BY id", params):
            # A ticket run again indexes the same text again: one entry per ticket, the newest.
            sources[row["doc"]][row["ticket_id"]] = {"ticket_id": row["ticket_id"],
                                                     "run_id": row["run_id"],
                                                     "indexed_at": row["created_at"],
                                                     "deleted_at": row["deleted_at"]}
        return {doc: list(by_ticket.values()) for doc, by_ticket in sources.items()}

    def memory_usage(self, project_id: str | None = None) -> dict[str, Any]:
        """How often recalled memories were used, from the run events: per run, the memories
        its recalls showed the agent (`recall` events) and the ones its decisions said they
        relied on (`memories_used` in `decision` events). Per memory (its short id): runs that
        recalled it, runs that used it; per backend (the one that recalled): the same summed,
        and the share used. Only a memory a run was shown counts as used."""
        sql = ("SELECT e.run_id, e.kind, e.data FROM run_events e JOIN tickets t ON t.id = e.ticket_id"
               " WHERE e.kind IN ('recall', 'decision')")
        params: tuple[Any, ...] = ()
        if project_id is not None:
            sql += " AND t.project_id = ?"
            params = (project_id,)
        shown: dict[str, dict[str, str]] = defaultdict(dict)  # run -> memory id -> backend
        used: dict[str, set[str]] = defaultdict(set)
        for row in self._read(sql + " ORDER BY e.id", params):
            data = json.loads(row["data"])
            if row["kind"] == "recall":
                for memory in data.get("memories") or []:
                    shown[row["run_id"]][str(memory.get("id"))] = str(data.get("backend") or "?")
            else:
                for use in (data.get("decision") or {}).get("memories_used") or []:
                    if isinstance(use, dict) and use.get("id"):
                        used[row["run_id"]].add(str(use["id"]))
        by_memory: dict[str, dict[str, Any]] = defaultdict(lambda: {"recalled": 0, "used": 0})
        by_backend: dict[str, dict[str, Any]] = defaultdict(lambda: {"recalled": 0, "used": 0})
        for run, memories in shown.items():
            for ident, backend in memories.items():
                hit = ident in used.get(run, set())
                for table, key in ((by_memory, ident), (by_backend, backend)):
                    table[key]["recalled"] += 1
                    table[key]["used"] += int(hit)
        for row in by_backend.values():
            row["use_rate"] = row["used"] / row["recalled"] if row["recalled"] else 0.0
        return {"by_memory": dict(by_memory), "by_backend": dict(by_backend)}

    def last_event_id(self, *, ticket_id: str | None = None, run_id: str | None = None) -> int:
        """The newest event id (0 when none): a page renders up to it, then streams what follows."""
        named = {column: value for column, value in (("ticket_id", ticket_id), ("run_id", run_id))
                 if value is not None}
        where = " AND ".join(f"{column} = ?" for column in named) or "1 = 1"
        return int(self._read(f"SELECT COALESCE(MAX(id), 0) FROM run_events WHERE {where}",
                              tuple(named.values()))[0][0])

    def project_ids(self) -> list[str]:
        """The projects that have tickets, sorted."""
        return [row[0] for row in self._read(
            "SELECT DISTINCT project_id FROM tickets ORDER BY project_id")]

    def run_end_data(self, run_id: str) -> dict[str, Any] | None:
        """The data of the run's latest `run_end` event (None if it has none): e.g. whether a
        failure can be resumed."""
        rows = self._read(
            "SELECT data FROM run_events WHERE run_id = ? AND kind = 'run_end' ORDER BY id DESC LIMIT 1",
            (run_id,))
        return json.loads(rows[0]["data"]) if rows else None
