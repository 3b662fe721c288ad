"""Indexing new docs into a vector store on PostgreSQL runs no DELETE of chunk vectors: a new doc
has none, and psycopg's prepared DELETE, planned while the table was empty, scanned the whole
table for every later doc (100,000 docs of MiniLM: the first 5,000 took 57 s, then slower).
A statement trigger refusing any DELETE on retrieval_chunks stands guard: it fires even for a
DELETE that matches no row."""

from __future__ import annotations

import psycopg
import pytest

from backends.hybrid.backend import HybridBackend
from orchestrator.plugin_api import MemoryDatabase

pytestmark = pytest.mark.postgres

GUARD = """
CREATE FUNCTION refuse_chunk_deletes() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'a DELETE of chunk vectors (planted by the test)'; END $$;
CREATE TRIGGER refuse_chunk_deletes BEFORE DELETE ON retrieval_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_chunk_deletes();
"""


def test_new_docs_are_indexed_without_deleting_chunks(tmp_path, pg_url):
    backend = HybridBackend(tmp_path, HybridBackend.Options(embedder="hashing"),
                            database=MemoryDatabase(pg_url, "chunks"))
    try:
        backend.index(["Deploys run on Tuesday."])  # the tables made
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(GUARD)
        backend.index([f"Ticket {n}: tidied module m{n}." for n in range(30)])
        assert backend.retrieve(["tidied module m7"], 1)[0]["docs"] == ["Ticket 7: tidied module m7."]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER refuse_chunk_deletes ON retrieval_chunks")
        backend.delete(["Ticket 7: tidied module m7."])  # a doc's own delete still takes its vectors
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT count(*) FROM retrieval_chunks").fetchone()[0] == 30
    finally:
        backend.close()
