"""The retrieval store on PostgreSQL beyond the contract: the same ranking as SQLite, projects
kept apart in one database, untrusted rows and schemas refused with the database named."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from backends import pg_database
from backends.bm25 import Bm25Backend
from backends.hybrid import HybridBackend
from orchestrator.plugin_api import MemoryDatabase, MemoryStoreError
from orchestrator.testing.samples import sample_doc

pytestmark = pytest.mark.postgres

DOCS = [sample_doc(i, tag=t) for t in ("alpha", "beta") for i in range(25)] + [
    "Fixed the WiFi dropouts by moving the router off channel 13",
    "Error code QX-4471 came from the payment gateway's sandbox",
    "datasette/views/table.py now sorts columns by their label",
    "Renamed CamelCaseThing to snake_case_thing across the config parser",
    "Café menu: naïve crème brûlée, the déjà vu special",
]
QUERIES = ["payment webhook retry", "QX-4471", "table.py sorting", "CamelCaseThing", "cafe creme",
           "fixed the login form by escaping the input", "module_beta_7", "the of and"]


def with_password(url: str) -> str:
    """The URL with a password (the test server trusts local connections, so any will do)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or 'postgres'}:s3cret@{host}"))


@pytest.mark.parametrize("cls, options", [(HybridBackend, {"embedder": "hashing",
                                                            "recency_weight": 0.0}),
                                           (Bm25Backend, {})], ids=["hybrid", "bm25"])
def test_ranks_as_the_sqlite_store_does(tmp_path, pg_url, cls, options):
    lite = cls(tmp_path / "lite", options)
    pg = cls(tmp_path / "pg", options, database=MemoryDatabase(pg_url, "p"))
    for backend in (lite, pg):
        backend.index(DOCS)
        backend.clock = lambda: 1e9  # one moment for both
    for query in QUERIES:
        (a,), (b,) = lite.retrieve([query], 5), pg.retrieve([query], 5)
        assert b["docs"] == a["docs"], query
        if "_" not in query:  # FTS5 adds a phrase's own score for a word joined by '_'
            assert b["doc_scores"] == pytest.approx(a["doc_scores"], rel=0.05, abs=1e-4), query
    lite.close()
    pg.close()


def test_projects_in_one_database_are_apart(tmp_path, pg_url):
    one = HybridBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(pg_url, "one"))
    two = HybridBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(pg_url, "two"))
    one.index([sample_doc(1), sample_doc(2)])
    two.index([sample_doc(2), sample_doc(3)])
    assert one.delete([sample_doc(2)]) == 1
    assert one.list_docs() == [sample_doc(1)]
    assert two.list_docs() == [sample_doc(2), sample_doc(3)]
    assert two.retrieve([sample_doc(1)], 5)[0]["docs"] == [sample_doc(2), sample_doc(3)]
    bm25 = Bm25Backend(tmp_path, {}, database=MemoryDatabase(pg_url, "one"))  # another backend
    assert bm25.list_docs() == []
    for backend in (one, two, bm25):
        backend.close()


def test_store_exists_creates_nothing(tmp_path, pg_url):
    database = MemoryDatabase(pg_url, "p")
    assert not HybridBackend.store_exists(tmp_path, database)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('retrieval_stores')").fetchone()[0] is None
    HybridBackend(tmp_path, {"embedder": "hashing"}, database=database).close()
    assert HybridBackend.store_exists(tmp_path, database)
    assert not HybridBackend.store_exists(tmp_path, MemoryDatabase(pg_url, "other"))
    assert not Bm25Backend.store_exists(tmp_path, database)


def _plant(url: str, sql: str, *params) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql, params)


def test_a_newer_schema_is_refused_naming_the_database_not_its_password(tmp_path, pg_url):
    HybridBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(pg_url, "p")).close()
    _plant(pg_url, "UPDATE retrieval_schema SET version = %s", pg_database.SCHEMA_VERSION + 1)
    url = with_password(pg_url)
    with pytest.raises(MemoryStoreError) as caught:
        HybridBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(url, "p"))
    message = str(caught.value)
    assert "newer than this middle-agent reads" in message
    assert "s3cret" not in message and ":***@" in message
    assert urlsplit(pg_url).path in message  # the database's name


def test_corrupt_meta_is_a_clear_error(tmp_path, pg_url):
    database = MemoryDatabase(pg_url, "p")
    HybridBackend(tmp_path, {"embedder": "hashing"}, database=database).close()
    _plant(pg_url, "UPDATE retrieval_meta SET value = 'not json {' WHERE key = 'embedder_spec'")
    with pytest.raises(MemoryStoreError, match="corrupt.*embedder_spec"):
        HybridBackend(tmp_path, {"embedder": "hashing"}, database=database)
    _plant(pg_url, """UPDATE retrieval_meta SET value = '["os.system", "echo hi"]'
                      WHERE key = 'embedder_spec'""")
    with pytest.raises(MemoryStoreError, match="corrupt.*not an embedder spec"):
        HybridBackend(tmp_path, {"embedder": "hashing"}, database=database)


def test_a_vector_of_another_size_is_a_clear_error(tmp_path, pg_url):
    backend = HybridBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(pg_url, "p"))
    backend.index([sample_doc(1), sample_doc(2)])
    _plant(pg_url, "UPDATE retrieval_chunks SET embedding = '[1,2,3]' WHERE doc_id = "
                   "(SELECT max(doc_id) FROM retrieval_chunks)")
    with pytest.raises(MemoryStoreError) as caught:
        backend.retrieve([sample_doc(1)], 5)
    assert "different vector dimensions" in str(caught.value)
    assert urlsplit(pg_url).path in str(caught.value)
    backend.close()


def test_an_unreachable_server_is_a_clear_error(tmp_path):
    url = "postgresql://nobody:pw@127.0.0.1:1/nowhere?connect_timeout=2"
    with pytest.raises(MemoryStoreError) as caught:
        HybridBackend(tmp_path, {"embedder": "hashing"}, database=MemoryDatabase(url, "p"))
    assert "127.0.0.1:1/nowhere" in str(caught.value) and "pw@" not in str(caught.value)


def test_a_recorded_endpoint_does_not_choose_where_text_and_keys_go(tmp_path, pg_url):
    database = MemoryDatabase(pg_url, "p")
    HybridBackend(tmp_path, {"embedder": "hashing"}, database=database).close()
    planted = ('{"embedder": "openai:text-embedding-3-small", "embedder_url": '
               '"http://attacker.invalid/v1", "embedder_api_key_env": "ANTHROPIC_API_KEY"}')
    _plant(pg_url, "UPDATE retrieval_meta SET value = %s WHERE key = 'embedder_spec'", planted)
    with pytest.raises(MemoryStoreError, match="does not choose where text and keys are sent"):
        HybridBackend(tmp_path, {}, database=database)  # embedder = "auto" reads the record
    named = {"embedder": "openai:text-embedding-3-small", "embedder_url": "http://attacker.invalid/v1",
             "embedder_api_key_env": "ANTHROPIC_API_KEY"}
    HybridBackend(tmp_path, named, database=database).close()  # the config's own choice opens
