"""The backend contract suite against PostgreSQL: every built-in backend with its store in a real
database (hybrid, dense and bm25 on pgvector and BM25 postings; hipporag, hindsight and
sliding_window in a schema of their own), other processes taking the facade's advisory lock as
machines do."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import outside_sql  # tests/outside_sql.py
import pg_factories
import psycopg
import pytest

from backends import pg_database
from orchestrator.plugin_api import MemoryDatabase
from orchestrator.testing import MemoryBackendContract

pytestmark = pytest.mark.postgres

FAIL_WRITES = """
CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'disk full (planted by the test)'; END $$;
CREATE TRIGGER refuse_writes BEFORE INSERT OR UPDATE OR DELETE ON retrieval_postings
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_writes();
"""


@pytest.fixture(scope="module")
def memory_tables(pg_server) -> Iterator[str]:
    """A database holding only what middle lays once per database (the pgvector extension and
    the shared memory tables, as any machine's first open leaves them), to copy for each test.
    Laying them from nothing (the migration, tested in test_pg_store.py and test_pg_df.py) cost
    each of these tests a fifth of a second; each test's backend still makes its own store."""
    url = pg_server.create_database("memory_tables")
    pg_database.release(pg_database.acquire(MemoryDatabase(url, "template")))  # its pool closes
    yield url
    pg_server.drop_database(url)


@pytest.fixture
def memory_url(pg_server, memory_tables) -> Iterator[str]:
    """A fresh database of this test's own: a copy of `memory_tables`, dropped after it."""
    url = pg_server.create_database(template=memory_tables)
    yield url
    pg_server.drop_database(url)


class PostgresContract(MemoryBackendContract):
    """Each test gets a fresh database (the shared memory tables laid, no store in it); the store
    directory's name is the project."""

    process_lock = "pg_factories:ProjectLock"

    @pytest.fixture(autouse=True)
    def _database(self, memory_url, monkeypatch):
        monkeypatch.setenv(pg_factories.URL_ENV, memory_url)  # spawned processes inherit it
        self.url = memory_url

    @pytest.fixture
    def fail_writes(self, memory_url):
        """The database refuses every write of the store's postings (a trigger raising), as a
        full disk or a revoked grant would: RLIMIT_FSIZE does not reach a server process."""

        @contextmanager
        def refusing() -> Iterator[None]:
            with psycopg.connect(memory_url, autocommit=True) as conn:
                conn.execute(FAIL_WRITES)
            try:
                yield
            finally:
                with psycopg.connect(memory_url, autocommit=True) as conn:
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


class SchemaStoreContract(PostgresContract):
    """A backend whose store is a schema of its own (backends.pg_storage): a failed write is a
    trigger refusing every write to any of the schema's tables; another program's write is
    psql's (outside_sql), which the backend catches up on."""

    backend_name = ""

    @pytest.fixture
    def outside_writer(self, memory_url):
        def write(store_dir, op, old, new):
            outside_sql.write(memory_url, self.backend_name, op, old, new, store_dir.name)
        return write

    @pytest.fixture
    def fail_writes(self, memory_url):
        @contextmanager
        def refusing() -> Iterator[None]:
            with psycopg.connect(memory_url, autocommit=True) as conn:
                tables = [f"{r[0]}.{r[1]}" for r in conn.execute(
                    "SELECT schemaname, tablename FROM pg_tables WHERE schemaname LIKE 'memory_store_%'")]
                conn.execute("CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS "
                             "$$ BEGIN RAISE EXCEPTION 'disk full (planted by the test)'; END $$")
                for table in tables:
                    conn.execute(f"CREATE TRIGGER refuse_writes BEFORE INSERT OR UPDATE OR DELETE ON "
                                 f"{table} FOR EACH STATEMENT EXECUTE FUNCTION refuse_writes()")
            try:
                yield
            finally:
                with psycopg.connect(memory_url, autocommit=True) as conn:
                    for table in tables:
                        conn.execute(f"DROP TRIGGER refuse_writes ON {table}")
                    conn.execute("DROP FUNCTION refuse_writes()")
        return refusing


class TestHippoRAGPostgresContract(SchemaStoreContract):
    backend_name = "hipporag"
    process_factory = "pg_factories:hipporag"
    process_docs_per_thread = 6

    @pytest.fixture
    def backend_factory(self):
        return pg_factories.hipporag


class TestHindsightPostgresContract(SchemaStoreContract):
    backend_name = "hindsight"
    process_factory = "pg_factories:hindsight"
    process_docs_per_thread = 6

    @pytest.fixture
    def backend_factory(self):
        return pg_factories.hindsight


class TestSlidingWindowPostgresContract(SchemaStoreContract):
    backend_name = "sliding_window"
    relevance_ranked = False  # it returns the newest summary and docs, whatever the query
    process_factory = "pg_factories:sliding_window"

    @pytest.fixture
    def backend_factory(self):
        return pg_factories.sliding_window
