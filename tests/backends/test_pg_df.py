"""BM25 on PostgreSQL reads each term's document frequency from `retrieval_df` (schema version 5)
instead of counting the term's postings in every query: the ranking is the one counting gave,
and the counts stay exact through every write: middle's adds, edits, supersedes, forgets, undos
and reindex, a doc another program deletes or rewrites, two processes racing adds and forgets,
and a version-4 database counted in place when it is first opened."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_memory_curation import open_curator

from backends.bm25.backend import Bm25Backend
from orchestrator.bench.memory_page import doc_text
from orchestrator.memory import stores
from orchestrator.memory.bulk import forget_all
from orchestrator.memory.format import doc_id
from orchestrator.plugin_api import MemoryDatabase

pytestmark = pytest.mark.postgres

WHO = "tester@here"
# What BM25 ran before version 5: each term's document frequency counted from its postings.
COUNTED = """
WITH terms AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('middle_memory_english', %(words)s))),
hits AS (
    SELECT p.term, p.doc_id, p.tf, p.doc_len FROM retrieval_postings p
    WHERE p.store_id = %(store)s AND p.term IN (SELECT lexeme FROM terms)),
df AS (SELECT term, count(*)::float8 AS n FROM hits GROUP BY term),
st AS (SELECT n_docs::float8 AS n_docs, GREATEST(total_len::float8 / GREATEST(n_docs, 1), 1e-9) AS avgdl
       FROM retrieval_stores WHERE id = %(store)s),
idf AS (SELECT term, GREATEST(ln((st.n_docs - n + 0.5) / (n + 0.5)), 1e-6) AS idf FROM df CROSS JOIN st)
SELECT h.doc_id, sum(idf.idf * h.tf * 2.2::float8
                     / (h.tf + 1.2::float8 * (0.25::float8 + 0.75::float8 * h.doc_len / st.avgdl))) AS score
FROM hits h JOIN idf USING (term) CROSS JOIN st
GROUP BY h.doc_id ORDER BY score DESC, h.doc_id LIMIT %(k)s"""

QUERIES = ["Module 41 login session ticket check", "src/f17.py passes", "Task 123 changed module m26",
           "deploys Tuesday release freeze", "check 7919 passes", "zebra quartz"]


def _backend(tmp_path: Path, url: str, project: str) -> Bm25Backend:
    return Bm25Backend(tmp_path / project, Bm25Backend.Options(), database=MemoryDatabase(url, project))


def _df_exact(url: str) -> int:
    """Every store's kept document frequencies (folded, and deltas not folded yet) are its
    postings counted again; how many terms."""
    with psycopg.connect(url) as conn:
        kept = conn.execute(
            "SELECT store_id, term, sum(n) FROM (SELECT store_id, term, n FROM retrieval_df UNION ALL "
            "SELECT store_id, term, d FROM retrieval_df_delta) counts GROUP BY 1, 2 HAVING sum(n) != 0 "
            "ORDER BY 1, 2").fetchall()
        counted = conn.execute("SELECT store_id, term, count(*) FROM retrieval_postings "
                               "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    assert kept == counted
    return len(kept)


def test_bm25_ranks_as_counting_the_postings_did(tmp_path, pg_url):
    backend = _backend(tmp_path, pg_url, "same")
    try:
        backend.index([doc_text(i) for i in range(300)] + ["Deploys run on Tuesday after the release freeze."])
        store = backend._store
        for query in QUERIES:
            with store.read() as conn:
                before = conn.execute(COUNTED, {"words": store.bm25_words(query), "store": store.store_id,
                                                "k": 100}).fetchall()
            now = store.bm25(query, 100)
            assert [i for i, _ in now] == [int(i) for i, _ in before], query
            assert [s for _, s in now] == pytest.approx([float(s) for _, s in before], rel=1e-12), query
        assert len(store.bm25(QUERIES[0], 100)) == 100  # a query every doc matches ranks them all
    finally:
        backend.close()
    assert _df_exact(pg_url) > 300


_TOOL = """
import sys, psycopg
with psycopg.connect(sys.argv[1]) as conn:
    conn.execute(sys.argv[2], sys.argv[3:])
"""


def _tool(url: str, sql: str, *params: str) -> None:
    """Another program's write: plain psycopg, no middle code, in a process of its own."""
    done = subprocess.run([sys.executable, "-c", _TOOL, url, sql, *params], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_document_frequencies_stay_exact_through_curation(tmp_path, pg_url):
    curator, store = open_curator(tmp_path, "bm25", url=pg_url)
    memory = curator.facade
    try:
        memory.index("p", [doc_text(i) for i in range(60)])
        _df_exact(pg_url)
        rule = "Rule: login sessions use the cookie store."
        added = curator.add("p", rule, WHO).change
        edited = curator.edit("p", doc_id(rule), "Rule: login sessions use the signed cookie store.", WHO)
        _df_exact(pg_url)
        curator.supersede("p", doc_id(edited.doc), "Rule: login sessions use JWT tokens.", WHO)
        _df_exact(pg_url)
        forgotten = curator.forget("p", doc_id(doc_text(3)), WHO).change
        _df_exact(pg_url)
        assert forgotten is not None and added is not None
        curator.undo("p", forgotten, WHO)
        bulk = forget_all(curator, "p", [doc_text(i) for i in range(10, 20)], WHO, "tests").change
        _df_exact(pg_url)
        assert bulk is not None
        curator.undo("p", bulk, WHO)
        _df_exact(pg_url)
        stores.reindex(memory, "p", "bm25")  # in place
        with psycopg.connect(pg_url) as conn:  # middle's writes folded their deltas as they went
            assert conn.execute("SELECT count(*) FROM retrieval_df_delta").fetchone()[0] == 0
        # another program deletes one doc (its postings go by cascade) and rewrites another
        _tool(pg_url, "DELETE FROM retrieval_docs WHERE text = %s", doc_text(5))
        _tool(pg_url, "UPDATE retrieval_docs SET text = %s WHERE text = %s",
              "Invoices are emailed to billing contacts.", doc_text(6))
        # a writer that does not count what it adds (an older middle-agent still running)
        _tool(pg_url, "INSERT INTO retrieval_postings (store_id, term, doc_id, tf, doc_len) "
              "SELECT store_id, 'handmade', id, 1, doc_len FROM retrieval_docs WHERE text = %s", doc_text(7))
        _df_exact(pg_url)  # each at once; the rewrite's postings wait for the catch-up
        assert texts(memory, "invoices emailed billing") == ["Invoices are emailed to billing contacts."]
        assert _df_exact(pg_url) > 0
    finally:
        memory.close()
        store.close()


def texts(memory: Any, query: str) -> list[str]:
    return memory.retrieve("p", [query], 1)[0]["docs"]


_RACER = """
import sys
from pathlib import Path
from backends.bm25.backend import Bm25Backend
from orchestrator.plugin_api import MemoryDatabase

url, name, root = sys.argv[1:4]
backend = Bm25Backend(Path(root), Bm25Backend.Options(), database=MemoryDatabase(url, "race"))
for n in range(30):
    mine = [f"{name} note {n}: module m{n % 7} changed, check {n * 13} passes.",
            f"Shared note {n}: module m{n % 5} reviewed."]  # both racers add this one
    backend.index(mine)
    if n % 3 == 0:
        backend.delete([f"Shared note {n - 3}: module m{(n - 3) % 5} reviewed.", mine[0]])
backend.close()
"""


def test_two_processes_racing_adds_and_forgets_keep_them_exact(tmp_path, pg_url):
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, pg_url, name, str(tmp_path / name)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for name in ("alice", "bob")]
    for racer in racers:
        out, _ = racer.communicate(timeout=300)
        assert racer.returncode == 0, out
    assert _df_exact(pg_url) > 10
    backend = _backend(tmp_path, pg_url, "race")
    try:
        assert 30 < len(backend.list_docs()) < 120
        assert backend.retrieve(["alice note 1 changed check 13"], 1)[0]["docs"] == \
            ["alice note 1: module m1 changed, check 13 passes."]
    finally:
        backend.close()


def test_a_version_4_database_is_counted_in_place(tmp_path, pg_url):
    from backends import pg_database

    backend = _backend(tmp_path, pg_url, "v4")
    backend.index([doc_text(i) for i in range(50)])
    before = backend._store.bm25(QUERIES[0], 20)
    backend.close()  # the last user: the next open checks the schema again
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in ("uncounted", "removed", "updated"):
            conn.execute(f"DROP TRIGGER retrieval_postings_df_{name} ON retrieval_postings")
            conn.execute(f"DROP FUNCTION retrieval_df_{name}()")
        conn.execute("DROP TABLE retrieval_df, retrieval_df_delta")
        conn.execute("UPDATE retrieval_schema SET version = 4")
    backend = _backend(tmp_path, pg_url, "v4")
    try:
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT version FROM retrieval_schema").fetchone()[0] == pg_database.SCHEMA_VERSION
        assert _df_exact(pg_url) > 50
        assert backend._store.bm25(QUERIES[0], 20) == before
        backend.delete([doc_text(0)])
        _df_exact(pg_url)
    finally:
        backend.close()


def test_a_count_changed_by_hand_past_the_docs_does_not_fail_searches(tmp_path, pg_url):
    backend = _backend(tmp_path, pg_url, "hand")
    try:
        backend.index([doc_text(i) for i in range(20)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            changed = conn.execute("UPDATE retrieval_df SET n = 1000 WHERE term = 'modul'")  # 20 docs hold it
            assert changed.rowcount == 1
        assert len(backend._store.bm25("module m3 ticket", 5)) == 5
    finally:
        backend.close()


def test_a_version_5_database_gets_the_index_of_outside_writes_by_doc(tmp_path, pg_url):
    """middle's write of a doc clears its own rows of retrieval_outside_writes by doc id: since
    version 6 by an index, where each clear read every row the store had logged."""
    from backends import pg_database

    backend = _backend(tmp_path, pg_url, "v5")
    backend.index([doc_text(i) for i in range(20)])
    backend.close()  # the last user: the next open checks the schema again
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP INDEX retrieval_outside_writes_by_doc")
        conn.execute("UPDATE retrieval_schema SET version = 5")
    backend = _backend(tmp_path, pg_url, "v5")
    try:
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT version FROM retrieval_schema").fetchone()[0] == pg_database.SCHEMA_VERSION == 6
            assert conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = "
                                "'retrieval_outside_writes_by_doc'").fetchone()[0].endswith("(store_id, doc_id)")
        backend.delete([doc_text(0)])
        assert doc_text(0) not in backend.list_docs() and len(backend.list_docs()) == 19
    finally:
        backend.close()
