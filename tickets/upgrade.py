"""Upgrading a PostgreSQL store's schema while a fleet works it, with no deadlock.

A migration alters tables a fleet's transactions keep using (a claim writes `tickets`, then
`runs`, then `claims`). Taking their locks one statement at a time, as the DDL goes, can wait
for a worker that in turn waits for a table the migration already holds: a deadlock, and
PostgreSQL then aborts one of the two. So the migration (one at a time across machines, under
the schema's advisory lock) first takes every table of the store in one `LOCK TABLE`, giving up
after `LOCK_WAIT_MS` (well under PostgreSQL's one-second `deadlock_timeout`, so a worker's
deadlock check never finds it waiting) and trying again until it holds them all. From then on it
waits for nothing, and the workers wait for it: their statements queue on the tables until the
migration commits, then go on against the new schema.
"""

from __future__ import annotations

import random
import time
from typing import Any, Iterable

LOCK_WAIT_MS = 500  # one try to take every table; under deadlock_timeout (1 s by default)


def lock_tables(conn: Any, tables: Iterable[str]) -> None:
    """Inside the migration's transaction (PostgreSQL): hold every existing one of `tables` in
    ACCESS EXCLUSIVE mode, trying again (a savepoint rolled back frees a try's partial locks)
    until one try takes them all within LOCK_WAIT_MS."""
    import psycopg

    existing = [t for t in tables if conn.execute("SELECT to_regclass(?) IS NOT NULL", (t,)).fetchone()[0]]
    if not existing:
        return  # a new store: nothing to wait for
    tries, started = 0, time.monotonic()
    while True:
        tries += 1
        conn.execute("SAVEPOINT lock_tables")
        try:
            conn.execute(f"SET LOCAL statement_timeout = {LOCK_WAIT_MS}")
            conn.execute(f"LOCK TABLE {', '.join(existing)} IN ACCESS EXCLUSIVE MODE")
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute("RELEASE SAVEPOINT lock_tables")
            return
        except psycopg.errors.QueryCanceled:
            conn.execute("ROLLBACK TO SAVEPOINT lock_tables")
            if tries % 20 == 0:
                import logging  # only here: `middle tickets` starts without it

                logging.getLogger("middle.store").warning(
                    "upgrading the ticket store's schema: still waiting for the workers' transactions after %.0fs",
                    time.monotonic() - started)
            time.sleep(random.uniform(0.05, 0.3))  # let the queued transactions through
