"""A doc written into a hipporag, hindsight or sliding_window store in PostgreSQL by hand
(psql: a process of its own) has none of what the backend derives (its graph, its facts, its
key) until the backend catches up on it (backends.rederive.CatchesUp: the store's triggers
logged the row), which the next `middle` does before it reads: no warning, the next search
finds the doc and `show` names it by its id. `middle memory reindex --from NAME` still
rebuilds the store where it is, in one transaction, and finds it the same. Each `middle`
here is a process of its own."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time

import pytest
from memory_cli_helpers import middle

from orchestrator.memory.format import doc_id
from orchestrator.testing import make_repo

DOCS = ["Deploys run on Tuesday after the release freeze.", "Exports write CSV files with a header row."]
HAND = "Backups of the billing database rotate every Sunday at midnight."

# The table of each backend's docs, and the row psql inserts there: (columns, values).
ROWS = {
    "hipporag": ("passages", "hash, text, created_at, source", "%(hash)s, %(text)s, %(now)s, 'offline'"),
    "hindsight": ("documents", "key, text_hash, text, source, retained_at, event_time, extractor",
                  "%(hash)s, %(hash)s, %(text)s, 'retain', %(now)s, %(now)s, 'offline'"),
    # the project's conversation: the newest message, with no key in `docs`
    "sliding_window": ("messages", "conversation_id, seq, role, text, created_at",
                       "':project:', (SELECT coalesce(max(seq), -1) + 1 FROM {schema}.messages WHERE "
                       "conversation_id = ':project:'), 'doc', %(text)s, %(now)s"),
}

# psql, as a person would run it: another process, its own connection, autocommit.
_PSQL = """
import sys, psycopg
url, backend, table, columns, values, text, hash_, now = sys.argv[1:9]
with psycopg.connect(url, autocommit=True) as conn:
    (store,) = conn.execute("SELECT id FROM retrieval_stores WHERE backend = %s", (backend,)).fetchone()
    schema = f"memory_store_{store}"
    conn.execute(f"INSERT INTO {schema}.{table} ({columns}) VALUES ({values.replace('{schema}', schema)})",
                 {"text": text, "hash": hash_, "now": float(now)})
"""


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(ROWS))
def test_a_doc_written_by_hand_is_found_after_a_reindex_in_place(name, tmp_path, pg_url):
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        f'[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        f'backend = "{name}"\nurl = "{pg_url}"\n'
        + ('' if name == "sliding_window" else '[memory.options]\nembedder = "hashing"\n'))
    for doc in DOCS:
        middle(tmp_path, "add", doc)
    table, columns, values = ROWS[name]
    done = subprocess.run([sys.executable, "-c", _PSQL, pg_url, name, table, columns, values, HAND,
                           hashlib.sha256(HAND.encode()).hexdigest(), str(time.time())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = middle(tmp_path, "list")
    assert HAND in listed.stdout  # the doc is there, caught up: nothing to warn of
    assert "written by another program" not in listed.stderr
    found = middle(tmp_path, "search", "billing database backups", "-k", "1")
    assert found.stdout.splitlines()[0].endswith(f"[{doc_id(HAND)[:8]}] {HAND}")
    assert HAND in middle(tmp_path, "show", doc_id(HAND)[:8]).stdout
    rebuilt = middle(tmp_path, "reindex", "--from", name)
    assert rebuilt.stdout.strip() == f"rebuilt the {name} store: 3 doc(s) indexed afresh"
    found = middle(tmp_path, "search", "billing database backups", "-k", "1")
    assert found.stdout.splitlines()[0].endswith(f"[{doc_id(HAND)[:8]}] {HAND}")
    assert "written by another program" not in found.stderr  # the note cleared with the rebuild
    assert HAND in middle(tmp_path, "show", doc_id(HAND)[:8]).stdout
    assert sorted(middle(tmp_path, "export").stdout.count(d) for d in [*DOCS, HAND]) == [1, 1, 1]
