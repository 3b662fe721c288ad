"""Another program writing a derived backend's store (the sqlite3 shell, psql, a script): an
insert, an in-place rewrite or a delete of one doc's row, run as a process of its own with its
own connection (autocommit), none of middle's code. Used by test_derived_catch_up.py and the
contract suites' `outside_writer` fixtures."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

# backend -> (the table of its docs, the SQL condition of a doc's row, the columns and values of
# a row another program inserts: `{schema}` is the store's schema and a dot in PostgreSQL, '' in SQLite)
TABLES = {
    "hipporag": ("passages", "text = %(old)s", "hash, text, created_at, source",
                 "%(hash)s, %(text)s, %(now)s, 'offline'"),
    "hindsight": ("documents", "text = %(old)s", "key, text_hash, text, source, retained_at, event_time, extractor",
                  "%(hash)s, %(hash)s, %(text)s, 'retain', %(now)s, %(now)s, 'offline'"),
    "sliding_window": ("messages", "conversation_id = ':project:' AND text = %(old)s",
                       "conversation_id, seq, role, text, created_at",
                       "':project:', (SELECT coalesce(max(seq), -1) + 1 FROM {schema}messages WHERE "
                       "conversation_id = ':project:'), 'doc', %(text)s, %(now)s"),
}

SQL = {"add": "INSERT INTO {schema}%(table)s (%(columns)s) VALUES (%(values)s)",
       "edit": "UPDATE {schema}%(table)s SET text = %%(text)s WHERE %(where)s",
       "forget": "DELETE FROM {schema}%(table)s WHERE %(where)s"}

_WRITE = """
import json, sqlite3, sys
where, sql, values, backend, project = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
if where.startswith("postgresql"):
    import psycopg
    with psycopg.connect(where, autocommit=True) as conn:
        (store,) = conn.execute("SELECT id FROM retrieval_stores WHERE backend = %s AND project = %s",
                                (backend, project)).fetchone()
        done = conn.execute(sql.replace("{schema}", f"memory_store_{store}."), values).rowcount
else:
    conn = sqlite3.connect(where)
    with conn:
        done = conn.execute(sql.replace("{schema}", "").replace("%(", ":").replace(")s", ""), values).rowcount
    conn.close()
assert done == 1, f"{done} rows written"
"""


def write(target: str, backend: str, op: str, old: str | None, new: str | None, project: str = "") -> None:
    """`op` ("add" new, "edit" old to new, "forget" old) on the store at `target`: a SQLite
    file, or a PostgreSQL URL (the store of `backend` for `project`)."""
    table, where, columns, values = TABLES[backend]
    sql = SQL[op] % {"table": table, "columns": columns, "values": values, "where": where}
    args = {"text": new, "old": old, "hash": hashlib.sha256((new or "").encode()).hexdigest(), "now": time.time()}
    done = subprocess.run([sys.executable, "-c", _WRITE, target, sql, json.dumps(args), backend, project],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
