"""Read-only aggregates for the board and the memory page, straight from the shared SQLite store.

Nothing is cached: every call reads the file, so a `middle run` in another process shows up on the
next request. These are plain SELECTs over the store's tables (through its `_read`, which holds the
store's lock and turns SQLite errors into StoreError).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, time, timezone
from typing import Any


def today_start_utc() -> str:
    """Midnight UTC today, in the store's timestamp format (so text comparison orders it)."""
    midnight = datetime.combine(datetime.now(timezone.utc).date(), time(0), tzinfo=timezone.utc)
    return midnight.isoformat(timespec="microseconds")


def ticket_stats(store: Any) -> dict[str, dict[str, Any]]:
    """Per ticket: turns and cost over all its runs, its number of runs and its last event time."""
    stats: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"turns": 0, "cost_usd": 0.0, "runs": 0, "last_event_at": None})
    for row in store._read(
            "SELECT r.ticket_id, COUNT(DISTINCT r.id) AS runs, COUNT(t.turn_no) AS turns,"
            " COALESCE(SUM(t.cost_usd), 0) AS cost FROM runs r LEFT JOIN turns t ON t.run_id = r.id"
            " GROUP BY r.ticket_id"):
        stats[row["ticket_id"]].update(turns=row["turns"], cost_usd=float(row["cost"]), runs=row["runs"])
    for row in store._read("SELECT ticket_id, MAX(at) AS at FROM run_events GROUP BY ticket_id"):
        stats[row["ticket_id"]]["last_event_at"] = row["at"]
    return dict(stats)


def project_totals(store: Any) -> list[dict[str, Any]]:
    """Per project: tickets by status, cost today (UTC) and all time, sorted by project id."""
    totals: dict[str, dict[str, Any]] = {}

    def entry(pid: str) -> dict[str, Any]:
        return totals.setdefault(pid, {"project": pid, "tickets": 0, "done": 0, "failed": 0,
                                       "running": 0, "pending": 0, "cost_today_usd": 0.0,
                                       "cost_total_usd": 0.0})

    for row in store._read("SELECT project_id, status, COUNT(*) AS n FROM tickets GROUP BY project_id, status"):
        e = entry(row["project_id"])
        e["tickets"] += row["n"]
        key = {"complete": "done"}.get(row["status"], row["status"])
        if key in ("done", "failed", "running", "pending"):
            e[key] += row["n"]
    for row in store._read(
            "SELECT tk.project_id, COALESCE(SUM(t.cost_usd), 0) AS total,"
            " COALESCE(SUM(CASE WHEN t.started_at >= ? THEN t.cost_usd ELSE 0 END), 0) AS today"
            " FROM turns t JOIN runs r ON r.id = t.run_id JOIN tickets tk ON tk.id = r.ticket_id"
            " GROUP BY tk.project_id", (today_start_utc(),)):
        e = entry(row["project_id"])
        e["cost_total_usd"], e["cost_today_usd"] = float(row["total"]), float(row["today"])
    return [totals[k] for k in sorted(totals)]


def doc_sources(store: Any, project_id: str) -> dict[str, list[dict[str, Any]]]:
    """For each doc text indexed by a ticket of the project: which tickets, when, and if deleted."""
    sources: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in store._read(
            "SELECT doc, ticket_id, created_at, deleted_at FROM memory_docs WHERE project_id = ?"
            " ORDER BY id", (project_id,)):
        sources[row["doc"]].append({"ticket_id": row["ticket_id"], "indexed_at": row["created_at"],
                                    "deleted_at": row["deleted_at"]})
    return dict(sources)


def last_event_id(store: Any, *, ticket_id: str | None = None, run_id: str | None = None) -> int:
    """The newest event id (0 when none): a page renders up to it, then streams what follows."""
    sql, params = "SELECT COALESCE(MAX(id), 0) FROM run_events WHERE 1 = 1", []
    if ticket_id is not None:
        sql += " AND ticket_id = ?"
        params.append(ticket_id)
    if run_id is not None:
        sql += " AND run_id = ?"
        params.append(run_id)
    return int(store._read(sql, tuple(params))[0][0])


def project_ids(store: Any, memory_dir: Any) -> list[str]:
    """Projects known from tickets, plus those that only have a memory store on disk."""
    ids = {row[0] for row in store._read("SELECT DISTINCT project_id FROM tickets")}
    if memory_dir is not None and memory_dir.is_dir():
        ids |= {p.name for p in memory_dir.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return sorted(ids)
