"""The ticket store: tickets, runs, turns (the execution log), claims, run events and indexed
memory docs, in SQLite (embedded) or PostgreSQL (shared); see tickets/db.py."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

from tickets.checks import CHECKS_SCHEMA, TicketChecks
from tickets.claims import CLAIMS_SCHEMA, Claim, TicketClaims, _claim, _fence
from tickets.curation import CURATION_SCHEMA, MemoryCuration
from tickets.db import RECONNECT_S, SqliteDatabase, and_equal, open_database, postgres_ddl
from tickets.end_hooks import DUE_INDEXES, END_HOOKS_SCHEMA, EndHookRecord
from tickets.errors import StoreError, TicketError
from tickets.events import EVENTS_SCHEMA, RunEvents
from tickets.model import RunRow, RunStatus, Ticket, TicketStatus, TurnRow, utc_now
from tickets.pull_signals import PULL_SIGNALS_SCHEMA, PullSignalRecord
from tickets.queries import TicketQueries
from tickets.queue import QUEUE_INDEXES, QUEUE_SCHEMA, TicketQueue, migrate_queue
from tickets.retention import RunRetention
from tickets.rounds import TicketRounds
from tickets.run_end import RunEnding
from tickets.runnable import put_status, recompute_deps_met, set_deps, status_changed
from tickets.upgrade import lock_tables

_IN_CHUNK = 500  # ids per IN list: well under SQLite's and PostgreSQL's parameter limits


class ResumeFacts(NamedTuple):
    """What decides whether a ticket's latest run can be resumed (see resume_facts)."""

    run: RunRow  # the latest run
    claim: Claim | None
    run_end: dict[str, Any] | None  # the data of that run's latest run_end event

__all__ = ["TicketStore", "SCHEMA_VERSION"]

# 2: the claims table (one run per ticket across processes), turn status 'interrupted', run events.
# 3: tickets.depends_on; a run's git record (base, branch, worktree, commit, changed paths, merge).
# 4: memory_docs.backend: the memory backend that indexed each doc (NULL: not recorded).
# 5: runs.premerge_commit: the base branch's commit just before the ticket was merged;
#    claims.owner_start: the claiming process's start token, so a reused pid is not taken for it.
# 6: runs.pr_url, runs.pr_state: the run's pull request ("opening" is recorded before the push).
# 7: memory_docs.index_pending: a completion doc memory could not index yet (retried later).
# 8: memory curation (tickets/curation.py: memory_state, memory_changes); memory_docs.run_id: the
#    run that indexed the doc.
# 9: check_baselines (tickets/checks.py); runs.check_status, runs.corrections, runs.check_budget;
#    pr_signals (tickets/pull_signals.py).
# 10: tickets.fence and claims.token: the fencing token of each claim (tickets/claims.py); leases
#    set by the database's clock.
# 11: ticket_deps (dependency edges: the store finds runnable tickets, tickets/queue.py);
#    tickets.retries and tickets.retry_at (bounded retries of runs a passing failure stopped);
#    run events ordered per ticket rather than database-wide (no schema change).
# 12: runs.check_note: what a "no worse" check had failing on the base already.
# 13: tickets.deps_met: how far a ticket's dependencies have come, kept by every status and
#    dependency write (tickets/runnable.py), so a claim reads runnable tickets only.
# 14: memory_state.valid_until (a doc's expiry, tickets/curation.py).
# 15: turns.coding_agent: the coding agent kind whose session the turn ran in (a ticket may pick
#    its agent; a session id means nothing to another kind's CLI). NULL: not recorded.
# 16: the index memory_state_by_replacement (project_id, superseded_by): a show or a curation
#    verb reads the states of its few docs by key (MemoryCuration.memory_state_for).
# 17: runs.pr_due: what a complete run's end asked of its pull request ("update" its open one,
#     "open" one for `[run] on_complete = "pr"`), written with the end and cleared once done, so a
#     kill between the two leaves it for `middle sync`; turns.observed: the round was given to a
#     conversation-watching memory backend (observe_round), so a takeover gives it once.
# 18: turns.hooked: the plugins' on_turn_end hook ran for the turn, so a takeover that finds the
#     turn done calls it only when unset (once per turn, as far as a store can make it);
#     runs.hooks_due and the end_hooks table: which plugins' end hooks a run's end owes and which
#     ran (tickets/end_hooks.py), so `middle sync` runs the ones a kill skipped.
# 19: the partial indexes runs_hooks_due and runs_pr_due (tickets/end_hooks.py DUE_INDEXES): each
#     `middle sync` finds the runs whose end owes something without reading every run.
SCHEMA_VERSION = 19
# Schema creation and upgrades on PostgreSQL take this advisory lock, so two machines starting at
# once do not both create tables ("middle" in ASCII); an upgrade then takes every table at once
# (tickets/upgrade.py), and workers wait for it.
SCHEMA_LOCK_KEY = 0x6D6964646C65

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tickets (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    project_path TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    source TEXT,
    fields TEXT NOT NULL DEFAULT '{}',
    depends_on TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    fence INTEGER NOT NULL DEFAULT 0,
    retries INTEGER NOT NULL DEFAULT 0,
    retry_at TEXT,
    deps_met INTEGER NOT NULL DEFAULT 2
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    ticket_id TEXT NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    reason TEXT,
    plan_memories TEXT,
    plan_prompt TEXT,
    total_cost_usd REAL NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    isolation TEXT,
    repo TEXT,
    base_branch TEXT,
    base_commit TEXT,
    branch TEXT,
    worktree TEXT,
    head_commit TEXT,
    changes TEXT,
    merge_commit TEXT,
    premerge_commit TEXT,
    revert_commit TEXT,
    offline INTEGER NOT NULL DEFAULT 0,
    pr_url TEXT,
    pr_state TEXT,
    pr_due TEXT,
    hooks_due TEXT,
    check_status TEXT,
    corrections INTEGER,
    check_budget INTEGER,
    check_note TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_ticket ON runs(ticket_id, started_at);
CREATE TABLE IF NOT EXISTS turns (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    turn_no INTEGER NOT NULL CHECK (turn_no >= 1),
    prompt TEXT NOT NULL,
    response TEXT,
    memories_invoked TEXT,
    decision TEXT,
    session_id TEXT,
    resume INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    usage TEXT NOT NULL DEFAULT '{}',
    num_turns INTEGER NOT NULL DEFAULT 0,
    is_error INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'error', 'interrupted')),
    started_at TEXT NOT NULL,
    ended_at TEXT,
    coding_agent TEXT,
    observed INTEGER NOT NULL DEFAULT 0,
    hooked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, turn_no)
);
CREATE TABLE IF NOT EXISTS memory_docs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_id TEXT NOT NULL REFERENCES tickets(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL,
    doc TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT,
    backend TEXT,
    index_pending INTEGER NOT NULL DEFAULT 0,
    run_id TEXT
);
CREATE INDEX IF NOT EXISTS memory_docs_by_ticket ON memory_docs(ticket_id);
""" + CLAIMS_SCHEMA + EVENTS_SCHEMA + CURATION_SCHEMA + CHECKS_SCHEMA + PULL_SIGNALS_SCHEMA + QUEUE_SCHEMA + (
    END_HOOKS_SCHEMA)

# A run's git record (issue: a ticket is a unit of code change); `changes` is JSON
# [{"path", "added", "deleted"}] from `git diff --numstat` (None: not committed yet). A merge
# moved the base branch from `premerge_commit` to `merge_commit`: that step is the ticket's
# change, whatever its branch's history, and what `middle revert` undoes.
GIT_RUN_FIELDS = ("isolation", "repo", "base_branch", "base_commit", "branch", "worktree", "head_commit",
                  "changes", "merge_commit", "premerge_commit", "revert_commit")
# offline: run on the built-in fake model, so its (made-up) cost is kept apart from real spending.
# A run's pull request (`middle pr`): its URL, and "opening" (intent recorded before the branch is
# pushed), "open", "merged", "closed" or "gone" (GitHub no longer has it: the URL is cleared);
# `pr_due`: what the run's end asked of it and no hook has done yet (schema 17).
PR_RUN_FIELDS = ("pr_url", "pr_state", "pr_due")
# The check loop: the last check's outcome ("passed", "no-worse", "failed") and, for "no-worse",
# what the base already had failing (check_note); the check failures
# fed back to the middle agent (corrections), and how many it may get (raised by a resume).
CHECK_RUN_FIELDS = ("check_status", "corrections", "check_budget", "check_note")
_RUN_FIELDS = frozenset({"plan_memories", "plan_prompt", "total_cost_usd", "ended_at", "offline",
                         *GIT_RUN_FIELDS, *PR_RUN_FIELDS, *CHECK_RUN_FIELDS})
# Columns added after a table was first created: (table, column, declaration) for the migration.
_ADDED_COLUMNS = (("tickets", "depends_on", "TEXT NOT NULL DEFAULT '[]'"),
                  *(("runs", name, "TEXT") for name in GIT_RUN_FIELDS),
                  ("runs", "offline", "INTEGER NOT NULL DEFAULT 0"),
                  ("memory_docs", "backend", "TEXT"),
                  ("claims", "owner_start", "TEXT"),
                  ("memory_docs", "index_pending", "INTEGER NOT NULL DEFAULT 0"),
                  *(("runs", name, "TEXT") for name in PR_RUN_FIELDS),
                  ("memory_docs", "run_id", "TEXT"),
                  ("runs", "check_status", "TEXT"), ("runs", "corrections", "INTEGER"),
                  ("runs", "check_budget", "INTEGER"),
                  ("tickets", "fence", "INTEGER NOT NULL DEFAULT 0"), ("claims", "token", "INTEGER NOT NULL DEFAULT 0"),
                  ("tickets", "retries", "INTEGER NOT NULL DEFAULT 0"), ("tickets", "retry_at", "TEXT"),
                  ("runs", "check_note", "TEXT"),
                  ("tickets", "deps_met", "INTEGER NOT NULL DEFAULT 2"),
                  ("memory_state", "valid_until", "TEXT"),
                  ("turns", "coding_agent", "TEXT"),
                  ("turns", "observed", "INTEGER NOT NULL DEFAULT 0"),
                  ("turns", "hooked", "INTEGER NOT NULL DEFAULT 0"), ("runs", "hooks_due", "TEXT"))
# The turns table's columns as schema 1 had them (what the schema 2 rebuild copies).
_TURN_COLUMNS_V1 = (
    "run_id, turn_no, prompt, response, memories_invoked, decision, session_id, resume, cost_usd,"
    " duration_ms, usage, num_turns, is_error, error, status, started_at, ended_at"
)


def _no_ticket(ticket_id: str) -> TicketError:
    # A ticket file written since the last sync is not in the store yet: say what takes it in.
    return TicketError(f"no ticket '{ticket_id}': list them with `middle tickets` (a new ticket file is "
                       "taken in by `middle run` or `middle sync`)")


def _no_run(run_id: str) -> TicketError:
    return TicketError(f"no run '{run_id}': list a ticket's runs with `middle log TICKET`")


def open_read_only(target: str | Path, reconnect_s: float = RECONNECT_S) -> TicketStore | None:
    """The store opened read-only, or None when no run has created it yet (a SQLite file that
    does not exist, or a database with no store in it): read-only commands create no files.
    `reconnect_s`: how long to wait for an unreachable server ([store] reconnect_s)."""
    try:
        return TicketStore(target, readonly=True, reconnect_s=reconnect_s)
    except TicketError:
        return None


class TicketStore(TicketClaims, TicketQueue, RunRetention, RunEvents, RunEnding, TicketQueries, TicketRounds,
                  MemoryCuration, TicketChecks, PullSignalRecord, EndHookRecord):
    """Tickets and their execution log, shared by threads, processes and (on PostgreSQL) machines.

    `target` is the SQLite file (the embedded default) or a postgresql:// URL. `readonly=True`
    opens an existing store for reading only (read-only commands create nothing). Every database
    error becomes a StoreError naming the store and what to do.
    """

    def __init__(self, target: str | Path, *, readonly: bool = False, reconnect_s: float = RECONNECT_S) -> None:
        self._db = open_database(target, readonly=readonly, reconnect_s=reconnect_s)
        self.readonly = readonly
        self.path = getattr(self._db, "path", None) or self._db.where  # for messages and logs
        self.version = SCHEMA_VERSION  # a store opened read-only may be older (not migrated)
        try:
            if readonly:
                self.version = self._check_version()
            else:
                self._init_schema()
        except sqlite3.Error as err:
            self._db.close()
            raise self._db.open_error(err) if isinstance(self._db, SqliteDatabase) else err from err
        except BaseException:
            self._db.close()
            raise

    @property
    def where(self) -> str:
        """The store for messages: the SQLite file's path, or the URL without its password."""
        return self._db.where

    # -- plumbing ---------------------------------------------------------------------------

    def _check_version(self) -> int:
        if self._db.dialect == "postgres" and not self._db.read(
                "SELECT 1 FROM information_schema.tables WHERE table_name = 'schema_version'"):
            raise TicketError(f"no ticket store at {self.where} yet: `middle run` creates it")
        rows = self._db.read("SELECT MAX(version) AS v FROM schema_version")
        version = rows[0]["v"] if rows else None
        self._refuse_newer(int(version or 0))
        return int(version or 0)

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the ticket store at {self.where} has schema version {version}, newer than "
                f"this middle-agent understands ({SCHEMA_VERSION}): upgrade middle-agent")

    def _stored_version(self) -> int:
        """The schema version the database records (0: no store yet); read without taking locks."""
        table = ("SELECT 1 FROM information_schema.tables WHERE table_name = 'schema_version'"
                 if self._db.dialect == "postgres" else
                 "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
        if not self._db.read(table):
            return 0
        return int(self._db.read("SELECT MAX(version) FROM schema_version")[0][0] or 0)

    def _init_schema(self) -> None:
        db = self._db
        current = self._stored_version()
        self._refuse_newer(current)
        if current == SCHEMA_VERSION:
            # Nothing to create: no DDL, so no table locks. A `CREATE INDEX IF NOT EXISTS` still
            # takes its table's lock, which against a fleet's claims (tickets, then runs) in
            # the other order would deadlock; a process that starts takes none.
            return
        statements = [st for st in (x.strip() for x in _SCHEMA.split(";")) if st]
        if db.dialect == "postgres":
            statements = [postgres_ddl(st) for st in statements]
        with db.write() as conn:
            if db.dialect == "postgres":  # one schema creation at a time across machines
                conn.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK_KEY,))
                if conn.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'schema_version'"
                                ).fetchone() and conn.execute("SELECT MAX(version) FROM schema_version"
                                                              ).fetchone()[0] == SCHEMA_VERSION:
                    return  # another machine created it while this one waited for the lock
                # Workers keep claiming meanwhile: every table at once, or none (tickets/upgrade.py).
                lock_tables(conn, re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))
            for statement in statements:
                conn.execute(statement)
            row = conn.execute("SELECT MAX(version) AS v FROM schema_version").fetchone()
            version = int(row[0] or 0)
            self._refuse_newer(version)  # inside the transaction: nothing of ours is written
            if version == 0:
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif version < SCHEMA_VERSION:
                if version < 2 and db.dialect == "sqlite":
                    _migrate_turns_v2(conn)
                _add_columns(db, conn)
                if version < 11:
                    migrate_queue(db, conn)
                if version < 13:
                    recompute_deps_met(conn)
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            for statement in (*QUEUE_INDEXES, *DUE_INDEXES):  # over columns the migration may just have added
                conn.execute(statement)

    def _write(self) -> AbstractContextManager[Any]:
        """One write transaction; rolled back on any error; database errors become StoreError."""
        return self._db.write()

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return self._db.read(sql, params)

    def schema_version(self) -> int:
        """The schema version recorded in the database file."""
        return int(self._read("SELECT MAX(version) FROM schema_version")[0][0])

    def close(self) -> None:
        self._db.close()

    def pool_for(self, target: str | Path) -> Any:
        """The store's PostgreSQL connection pool when `target` is the same database (the
        checkpointer shares it: one pool per process), else None."""
        return getattr(self._db, "pool", None) if getattr(self._db, "url", None) == str(target) else None

    @property
    def pushes_events(self) -> bool:
        """Whether followers are woken by the database (PostgreSQL) rather than polling."""
        return self._db.dialect == "postgres"

    def wait_for_events(self, timeout: float) -> bool:
        """Block until a run event may have been added (pushed by PostgreSQL; on SQLite after
        `timeout`, a poll). Followers then read what is new with `list_events(after=...)`."""
        return self._db.wait(timeout)

    def __enter__(self) -> TicketStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tickets ----------------------------------------------------------------------------

    @staticmethod
    def _ticket(row: sqlite3.Row) -> Ticket:
        data = dict(row)
        for name in ("fence", "retries", "retry_at", "deps_met"):  # the claims' and the queue's, not the ticket's
            data.pop(name, None)
        data["fields"] = json.loads(data["fields"])
        data["depends_on"] = json.loads(data.get("depends_on") or "[]")
        return Ticket(**data)

    def upsert_ticket(self, ticket: Ticket) -> Ticket:
        """Insert a ticket, or refresh an existing one's content while keeping its status."""
        fields_json = json.dumps(ticket.fields, sort_keys=True)
        content = (ticket.project_id, ticket.title, ticket.description, ticket.project_path,
                   ticket.source, fields_json, json.dumps(ticket.depends_on))
        columns = "SELECT project_id, title, description, project_path, source, fields, depends_on FROM tickets"
        with self._status_write() as conn:
            row = conn.execute(columns + " WHERE id = ?" + self._db.lock_row, (ticket.id,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO tickets (id, project_id, title, description, project_path, source,"
                    " fields, depends_on, status, status_reason, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (ticket.id, *content, ticket.status.value, ticket.status_reason,
                     ticket.created_at, ticket.updated_at))
                set_deps(conn, ticket.id, ticket.depends_on)
                # Its dependents (filed before it) counted it as no ticket: now as its status.
                status_changed(self._db, conn, ticket.id, None, ticket.status.value)
            elif tuple(row) != content:
                # Only a real change bumps updated_at, so re-syncing a folder is a no-op.
                conn.execute(
                    "UPDATE tickets SET project_id = ?, title = ?, description = ?, project_path = ?,"
                    " source = ?, fields = ?, depends_on = ?, updated_at = ? WHERE id = ?",
                    (*content, utc_now(), ticket.id))
                if row["depends_on"] != content[-1]:
                    set_deps(conn, ticket.id, ticket.depends_on)
            stored = conn.execute("SELECT * FROM tickets WHERE id = ?", (ticket.id,)).fetchone()
            if row is not None and row["depends_on"] != content[-1] and stored["status"] == "pending" \
                    and stored["deps_met"] >= 1:
                self._db.notify_runnable(conn)
        return self._ticket(stored)

    def has_ticket(self, ticket_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM tickets WHERE id = ?", (ticket_id,)))

    def get_ticket(self, ticket_id: str) -> Ticket:
        rows = self._read("SELECT * FROM tickets WHERE id = ?", (ticket_id,))
        if not rows:
            raise _no_ticket(ticket_id)
        return self._ticket(rows[0])

    def list_tickets(
        self, status: TicketStatus | str | None = None, project_id: str | None = None
    ) -> list[Ticket]:
        """Tickets oldest first, optionally only those with one status and/or one project."""
        sql, params = "SELECT * FROM tickets WHERE 1 = 1", []
        if status is not None:
            try:  # the status often comes straight from the command line
                status = TicketStatus(status)
            except ValueError:
                raise TicketError(f"unknown ticket status {status!r}: use one of "
                                  f"{', '.join(s.value for s in TicketStatus)}") from None
            sql += " AND status = ?"
            params.append(status.value)
        if project_id is not None:
            sql += " AND project_id = ?"
            params.append(project_id)
        rows = self._read(sql + " ORDER BY created_at, id", tuple(params))
        return [self._ticket(r) for r in rows]

    def set_status(self, ticket_id: str, status: TicketStatus | str, reason: str | None = None) -> None:
        status = TicketStatus(status)
        with self._status_write() as conn:
            if not put_status(self._db, conn, ticket_id, status.value, reason, utc_now()):
                raise _no_ticket(ticket_id)

    def set_status_if(self, ticket_id: str, only_from: tuple[str, ...], status: TicketStatus | str,
                      reason: str | None = None) -> bool:
        """Set the status only if it is one of `only_from` (checked in the same write); whether it was."""
        status = TicketStatus(status)
        with self._status_write() as conn:
            return put_status(self._db, conn, ticket_id, status.value, reason, utc_now(), only_from=only_from)

    def close_pull(self, run_id: str, pr_state: str, ticket_id: str, only_from: tuple[str, ...],
                   status: TicketStatus | str, reason: str) -> bool:
        """GitHub merged or closed the run's pull request: its `pr_state` and the ticket's status
        (only if one of `only_from`) in one transaction; whether the status was set. (Two writes,
        a kill between left pr_state no longer "open" on a ticket still complete, and no later sync
        reads a pull request whose pr_state is not "open".)"""
        status = TicketStatus(status)
        with self._status_write() as conn:
            if conn.execute("UPDATE runs SET pr_state = ? WHERE id = ?", (pr_state, run_id)).rowcount == 0:
                raise _no_run(run_id)
            return put_status(self._db, conn, ticket_id, status.value, reason, utc_now(), only_from=only_from)

    def clear_pending_notes(self, ticket_ids: Iterable[str]) -> None:
        """Drop the notes of those tickets that are still pending (why an earlier batch put them
        back), in one statement: a ticket another process has claimed since is left alone."""
        ids = sorted(set(ticket_ids))
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = tuple(ids[start : start + _IN_CHUNK])
            with self._write() as conn:
                conn.execute(
                    f"UPDATE tickets SET status_reason = NULL WHERE id IN ({','.join('?' * len(chunk))})"
                    " AND status = 'pending' AND status_reason IS NOT NULL",
                    chunk,
                )

    # -- runs -------------------------------------------------------------------------------

    @staticmethod
    def _run(row: sqlite3.Row) -> RunRow:
        # Both keys: `id` is the row's name, `run_id` matches the turn dicts and graph state.
        data = dict(row)
        data["run_id"] = data["id"]
        data["changes"] = json.loads(data["changes"]) if data.get("changes") else None
        return data  # type: ignore[return-value]  # the runs table's columns are RunRow's

    def create_run(self, ticket_id: str) -> str:
        """Start a new attempt at a ticket; its id is also the LangGraph thread id."""
        import uuid

        run_id = uuid.uuid4().hex
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM tickets WHERE id = ?", (ticket_id,)).fetchone() is None:
                raise _no_ticket(ticket_id)
            conn.execute(
                f"INSERT INTO runs (id, ticket_id, status, started_at) VALUES (?, ?, ?, {self._db.stamp_sql})",
                (run_id, ticket_id, RunStatus.RUNNING.value),
            )
        return run_id

    def get_run(self, run_id: str) -> RunRow:
        rows = self._read("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise _no_run(run_id)
        return self._run(rows[0])

    def list_runs(self, ticket_id: str) -> list[RunRow]:
        """A ticket's runs, oldest first (rowid breaks ties between equal start times)."""
        rows = self._read(
            f"SELECT * FROM runs WHERE ticket_id = ? ORDER BY started_at, {self._db.order_col}", (ticket_id,)
        )
        return [self._run(r) for r in rows]

    def run_repos(self) -> list[str]:
        """The git repositories runs worked in (for `middle gc`)."""
        return [r[0] for r in self._read("SELECT DISTINCT repo FROM runs WHERE repo IS NOT NULL ORDER BY repo")]

    def latest_run(self, ticket_id: str) -> RunRow | None:
        runs = self.list_runs(ticket_id)
        return runs[-1] if runs else None

    def resume_facts(self, ticket_ids: Iterable[str]) -> dict[str, ResumeFacts]:
        """Per ticket that has a run: its latest run, its claim and that run's latest `run_end`
        data, in three queries a chunk however many tickets (the board asks for every failed,
        interrupted or running one on each refresh)."""
        ids = sorted(set(ticket_ids))
        latest: dict[str, RunRow] = {}
        claims: dict[str, Claim] = {}
        ends: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = tuple(ids[start : start + _IN_CHUNK])
            marks = ",".join("?" * len(chunk))
            for row in self._read(
                f"SELECT * FROM runs WHERE ticket_id IN ({marks}) ORDER BY started_at, {self._db.order_col}", chunk
            ):
                latest[row["ticket_id"]] = self._run(row)  # oldest first: the last one stays
            for row in self._read(self._claims_sql() + f" WHERE ticket_id IN ({marks})", chunk):
                claims[row["ticket_id"]] = _claim(row)
        run_ids = sorted(run["id"] for run in latest.values())
        for start in range(0, len(run_ids), _IN_CHUNK):
            chunk = tuple(run_ids[start : start + _IN_CHUNK])
            for row in self._read(
                "SELECT run_id, data FROM run_events WHERE kind = 'run_end' AND run_id IN "
                f"({','.join('?' * len(chunk))}) ORDER BY id",
                chunk,
            ):
                ends[row["run_id"]] = json.loads(row["data"])  # ascending ids: the latest stays
        return {
            ticket_id: ResumeFacts(run, claims.get(ticket_id), ends.get(run["id"])) for ticket_id, run in latest.items()
        }

    def set_run_fields(self, run_id: str, *, token: int | None = None, **fields: Any) -> None:
        """Set some of a run's fields (the allow-list below). `token`: the run owner's claim
        token; the write is refused (ClaimLost) once another runner holds the run."""
        unknown = set(fields) - _RUN_FIELDS
        if unknown:
            raise ValueError(
                f"unknown run field(s) {', '.join(sorted(unknown))}: "
                f"settable fields are {', '.join(sorted(_RUN_FIELDS))}"
            )
        if not fields:
            return
        if isinstance(fields.get("changes"), list):
            fields["changes"] = json.dumps(fields["changes"])
        names = sorted(fields)  # names come from the allow-list above, never from the caller
        assignments = ", ".join(f"{n} = ?" for n in names)
        with self._write() as conn:
            _fence(self._db, conn, run_id, token)
            cur = conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*(fields[n] for n in names), run_id))
            if cur.rowcount == 0:
                raise _no_run(run_id)

    # -- turns ------------------------------------------------------------------------------

    @staticmethod
    def _turn(row: sqlite3.Row) -> TurnRow:
        data = dict(row)
        data["decision"] = json.loads(data["decision"]) if data["decision"] is not None else None
        data["usage"] = json.loads(data["usage"])
        data["resume"] = bool(data["resume"])
        data["is_error"] = bool(data["is_error"])
        return data  # type: ignore[return-value]  # the turns table's columns are TurnRow's

    def _turn_columns(self, prefix: str = "") -> str:
        """The turns table's columns to read; a store opened read-only may be older than schema 15
        (not migrated), and then reads its turns' coding agent as NULL."""
        names = [prefix + c.strip() for c in _TURN_COLUMNS_V1.split(",")]
        return ", ".join(names + [f"{prefix}coding_agent" if self.version >= 15 else "NULL AS coding_agent"])

    def start_turn(self, run_id: str, turn_no: int, prompt: str, session_id: str | None, resume: bool, *,
                   token: int | None = None, coding_agent: str | None = None) -> None:
        """Record a turn as running before Claude Code is launched, so a crash can be resumed.

        A turn left 'running' or 'error' is overwritten (a retry); a 'done' turn raises
        ValueError, because a completed turn is never re-run.
        """
        if turn_no < 1:
            raise ValueError(f"turn numbers start at 1, got {turn_no}")
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise _no_run(run_id)
            _fence(self._db, conn, run_id, token)
            row = conn.execute(
                "SELECT status FROM turns WHERE run_id = ? AND turn_no = ?", (run_id, turn_no)
            ).fetchone()
            if row is not None and row["status"] == "done":
                raise ValueError(
                    f"turn {turn_no} of run '{run_id}' already completed; a completed turn is "
                    "never re-run: read its stored result with get_turn()"
                )
            # A retry replaces the earlier attempt's row whole (its result columns reset).
            conn.execute(
                "INSERT INTO turns (run_id, turn_no, prompt, session_id, resume, coding_agent, status, started_at)"
                f" VALUES (?, ?, ?, ?, ?, ?, 'running', {self._db.stamp_sql})"
                " ON CONFLICT (run_id, turn_no) DO UPDATE SET"
                " prompt = excluded.prompt, session_id = excluded.session_id, resume = excluded.resume,"
                " coding_agent = excluded.coding_agent,"
                " status = 'running', started_at = excluded.started_at, response = NULL,"
                " memories_invoked = NULL, decision = NULL, cost_usd = 0, duration_ms = 0, usage = '{}',"
                " num_turns = 0, is_error = 0, error = NULL, ended_at = NULL",
                (run_id, turn_no, prompt, session_id, int(bool(resume)), coding_agent),
            )

    def finish_turn(
        self,
        run_id: str,
        turn_no: int,
        *,
        response: str,
        is_error: bool,
        error: str | None,
        cost_usd: float,
        duration_ms: int,
        usage: dict[str, Any],
        num_turns: int,
        token: int | None = None,
    ) -> None:
        """Store a turn's result; its status becomes 'error' when is_error, else 'done'."""
        status = "error" if is_error else "done"
        with self._write() as conn:
            _fence(self._db, conn, run_id, token)
            row = conn.execute(
                "SELECT status FROM turns WHERE run_id = ? AND turn_no = ?", (run_id, turn_no)
            ).fetchone()
            if row is None:
                raise ValueError(f"turn {turn_no} of run '{run_id}' was never started: call start_turn() first")
            if row["status"] == "done":
                raise ValueError(f"turn {turn_no} of run '{run_id}' already completed; its result is final")
            conn.execute(
                "UPDATE turns SET response = ?, is_error = ?, error = ?, cost_usd = ?, duration_ms = ?,"
                f" usage = ?, num_turns = ?, status = ?, ended_at = {self._db.stamp_sql}"
                " WHERE run_id = ? AND turn_no = ?",
                (
                    response,
                    int(bool(is_error)),
                    error,
                    float(cost_usd or 0.0),
                    int(duration_ms or 0),
                    json.dumps(usage or {}),
                    int(num_turns or 0),
                    status,
                    run_id,
                    turn_no,
                ),
            )

    def set_turn_assessment(self, run_id: str, turn_no: int, memories_invoked: str, decision: dict[str, Any], *,
                            token: int | None = None) -> None:
        """Attach the middle agent's recalled memories and decision to a turn."""
        with self._write() as conn:
            _fence(self._db, conn, run_id, token)
            cur = conn.execute(
                "UPDATE turns SET memories_invoked = ?, decision = ? WHERE run_id = ? AND turn_no = ?",
                (memories_invoked, json.dumps(decision), run_id, turn_no),
            )
            if cur.rowcount == 0:
                raise ValueError(f"turn {turn_no} of run '{run_id}' was never started: call start_turn() first")

    def mark_turn_observed(self, run_id: str, turn_no: int, *, token: int | None = None) -> None:
        """The turn's round was given to the memory's conversation-watching backends
        (observe_round): a takeover that finds the turn done gives it only when this is unset."""
        with self._write() as conn:
            _fence(self._db, conn, run_id, token)
            conn.execute("UPDATE turns SET observed = 1 WHERE run_id = ? AND turn_no = ?", (run_id, turn_no))

    def turn_observed(self, run_id: str, turn_no: int) -> bool:
        if self.version < 17:  # a read-only store not migrated yet: no record, none observed
            return False
        rows = self._read("SELECT observed FROM turns WHERE run_id = ? AND turn_no = ?", (run_id, turn_no))
        return bool(rows and rows[0][0])

    def mark_turn_hooked(self, run_id: str, turn_no: int, *, token: int | None = None) -> None:
        """The plugins' on_turn_end hook ran for the turn: a takeover that finds the turn done
        calls it only when this is unset."""
        with self._write() as conn:
            _fence(self._db, conn, run_id, token)
            conn.execute("UPDATE turns SET hooked = 1 WHERE run_id = ? AND turn_no = ?", (run_id, turn_no))

    def turn_hooked(self, run_id: str, turn_no: int) -> bool:
        if self.version < 18:  # a read-only store not migrated yet: no record, none hooked
            return False
        rows = self._read("SELECT hooked FROM turns WHERE run_id = ? AND turn_no = ?", (run_id, turn_no))
        return bool(rows and rows[0][0])

    def get_turn(self, run_id: str, turn_no: int) -> TurnRow | None:
        rows = self._read(f"SELECT {self._turn_columns()} FROM turns WHERE run_id = ? AND turn_no = ?",
                          (run_id, turn_no))
        return self._turn(rows[0]) if rows else None

    def list_turns(self, *, run_id: str | None = None, ticket_id: str | None = None) -> list[TurnRow]:
        """Turns of one run, or of all a ticket's runs (by run start, then turn number)."""
        sql = (
            f"SELECT {self._turn_columns('t.')}"
            " FROM turns t JOIN runs r ON r.id = t.run_id WHERE 1 = 1"
        )
        params: list[Any] = []
        sql = and_equal(sql, params, {"t.run_id": run_id, "r.ticket_id": ticket_id})
        rows = self._read(sql + f" ORDER BY r.started_at, r.{self._db.order_col}, t.turn_no", tuple(params))
        return [self._turn(r) for r in rows]

    def total_cost(self, run_id: str) -> float:
        """The sum of the run's turn costs in USD."""
        rows = self._read("SELECT COALESCE(SUM(cost_usd), 0) FROM turns WHERE run_id = ?", (run_id,))
        return float(rows[0][0])

    # -- memory docs ------------------------------------------------------------------------

    def add_memory_doc(
        self,
        ticket_id: str,
        project_id: str,
        doc: str,
        backend: str | None = None,
        run_id: str | None = None,
        *,
        pending: bool = False,
    ) -> None:
        """Remember the exact string indexed for a ticket, the memory backend indexing it and
        the run that wrote it; an identical live doc is kept once, because the index node re-runs
        when a crashed run is resumed. `pending`: recorded before memory indexes it
        (`memory_doc_indexed` clears it), so a doc memory could not take is indexed later, never
        lost."""
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM tickets WHERE id = ?", (ticket_id,)).fetchone() is None:
                raise _no_ticket(ticket_id)
            exists = conn.execute(
                "SELECT 1 FROM memory_docs WHERE ticket_id = ? AND project_id = ? AND doc = ? AND deleted_at IS NULL",
                (ticket_id, project_id, doc),
            ).fetchone()
            if exists is None:
                conn.execute(
                    "INSERT INTO memory_docs (ticket_id, project_id, doc, created_at, backend, run_id, index_pending) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (ticket_id, project_id, doc, utc_now(), backend, run_id, int(pending)),
                )

    def memory_doc_indexed(self, ticket_id: str, doc: str) -> None:
        """Memory has the ticket's doc now: no retry needed."""
        with self._write() as conn:
            conn.execute(
                "UPDATE memory_docs SET index_pending = 0 WHERE ticket_id = ? AND doc = ? AND index_pending = 1",
                (ticket_id, doc),
            )

    def pending_memory_docs(self, project_id: str | None = None) -> list[tuple[str, str, str]]:
        """Live completion docs memory could not index yet, oldest first: (ticket id, project, doc)."""
        params: list[Any] = []
        sql = and_equal(
            "SELECT ticket_id, project_id, doc FROM memory_docs WHERE index_pending = 1 AND deleted_at IS NULL",
            params,
            {"project_id": project_id},
        )
        return [(r["ticket_id"], r["project_id"], r["doc"]) for r in self._read(sql + " ORDER BY id", tuple(params))]

    def memory_docs(self, ticket_id: str, include_deleted: bool = False) -> list[str]:
        """The docs indexed for a ticket, oldest first; deleted ones only when asked."""
        sql = "SELECT doc FROM memory_docs WHERE ticket_id = ?"
        if not include_deleted:
            sql += " AND deleted_at IS NULL"
        return [r["doc"] for r in self._read(sql + " ORDER BY id", (ticket_id,))]

    def recent_memory_docs(self, project_id: str, limit: int) -> list[tuple[str, str]]:
        """The project's newest live ticket docs as (doc, indexed at), newest first: the
        "Recent work" part of the memories block."""
        if limit <= 0:
            return []
        rows = self._read(
            "SELECT doc, created_at FROM memory_docs WHERE project_id = ? AND "
            "deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT ?",
            (project_id, limit),
        )
        return [(r["doc"], r["created_at"]) for r in rows]

    def memory_doc_backends(self, ticket_id: str) -> dict[str, str | None]:
        """The ticket's live docs and the backend that indexed each (None: not recorded)."""
        rows = self._read(
            "SELECT doc, backend FROM memory_docs WHERE ticket_id = ? AND deleted_at IS NULL ORDER BY id", (ticket_id,)
        )
        return {r["doc"]: r["backend"] for r in rows}

    def replace_memory_doc(self, project_id: str, old: str, new: str) -> int:
        """After a memory doc was edited (delete + index), keep the tickets' record of it in step,
        so a later revert deletes the edited text; returns how many records changed."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE memory_docs SET doc = ? WHERE project_id = ? AND doc = ? AND deleted_at IS NULL",
                (new, project_id, old),
            )
            return cur.rowcount

    def mark_memory_docs_deleted(self, ticket_id: str) -> int:
        """Mark a ticket's live docs deleted (after a revert removed them); returns how many."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE memory_docs SET deleted_at = ? WHERE ticket_id = ? AND deleted_at IS NULL",
                (utc_now(), ticket_id),
            )
            return cur.rowcount


def _add_columns(db: Any, conn: Any) -> None:
    """Schema 2 -> 3 (and later): add the columns a newer schema declares to tables an older one created."""
    for table, column, declaration in _ADDED_COLUMNS:
        if column not in db.columns(conn, table):
            if db.dialect == "postgres":
                declaration = postgres_ddl(declaration)
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def _migrate_turns_v2(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2: rebuild `turns` so its status may be 'interrupted' (SQLite cannot alter a CHECK)."""
    conn.execute("ALTER TABLE turns RENAME TO turns_v1")
    ddl = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS turns") :]
    conn.execute(ddl[: ddl.index(");") + 1])
    conn.execute(f"INSERT INTO turns ({_TURN_COLUMNS_V1}) SELECT {_TURN_COLUMNS_V1} FROM turns_v1")
    conn.execute("DROP TABLE turns_v1")
