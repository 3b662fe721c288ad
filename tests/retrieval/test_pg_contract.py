"""The backend contract suite against PostgreSQL: hybrid, dense and bm25 with their stores in a
real database (pgvector), other processes taking the facade's advisory lock as machines do."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pg_factories
import psycopg
import pytest

from orchestrator.testing import MemoryBackendContract

pytestmark = pytest.mark.postgres

FAIL_WRITES = """
CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'disk full (planted by the test)'; END $$;
CREATE TRIGGER refuse_writes BEFORE INSERT OR UPDATE OR DELETE ON retrieval_postings
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_writes();
"""


class PostgresContract(MemoryBackendContract):
    """Each test gets a fresh database; the store directory's name is the project."""

    process_lock = "pg_factories:ProjectLock"

    @pytest.fixture(autouse=True)
    def _database(self, pg_url, monkeypatch):
        monkeypatch.setenv(pg_factories.URL_ENV, pg_url)  # spawned processes inherit it
        self.url = pg_url

    @pytest.fixture
    def fail_writes(self, pg_url):
        """The database refuses every write of the store's postings (a trigger raising), as a
        full disk or a revoked grant would: RLIMIT_FSIZE does not reach a server process."""

        @contextmanager
        def refusing() -> Iterator[None]:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(FAIL_WRITES)
            try:
                yield
            finally:
                with psycopg.connect(pg_url, autocommit=True) as conn:
                    conn.execute("DROP TRIGGER refuse_writes ON retrieval_postings; "
                                 "DROP FUNCTION refuse_writes()")
        return refusing


class TestHybridPostgresContract(PostgresContract):
    """Default options: the offline MiniLM, BM25 postings, fusion and the pipeline stages."""

    many_docs_count = 120
    process_docs_per_thread = 6
    process_factory = "pg_factories:hybrid"

    @pytest.fixture
    def backend_factory(self):
        return pg_factories.hybrid


class TestHybridAllStagesPostgresContract(PostgresContract):
    """Every optional stage on, the no-model embedder: RRF, MMR, threshold, budget, dedup."""

    many_docs_count = 200

    @pytest.fixture
    def backend_factory(self):
        return lambda store_dir: pg_factories.hybrid(
            store_dir, embedder="hashing", fusion="rrf", mmr_lambda=0.7, relevance_threshold=0.01,
            token_budget=400_000, dedup_threshold=0.999)


class TestDensePostgresContract(PostgresContract):
    process_factory = "pg_factories:dense_hashing"

    @pytest.fixture
    def backend_factory(self):
        return pg_factories.dense_hashing


class TestBm25PostgresContract(PostgresContract):
    process_factory = "pg_factories:bm25"

    @pytest.fixture
    def backend_factory(self):
        return pg_factories.bm25
