"""`middle bench scale` with NAME@postgres: SQLite and PostgreSQL stores side by side."""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner

from orchestrator.bench.runner import BackendSpec, Bench
from orchestrator.cli.main import main
from orchestrator.errors import ConfigError


def test_a_spec_names_its_engine_at_the_end():
    spec = BackendSpec.parse("hybrid:embedder=hashing,fusion=rrf@postgres")
    assert (spec.name, spec.options, spec.engine) == (
        "hybrid", {"embedder": "hashing", "fusion": "rrf"}, "postgres")
    assert BackendSpec.parse("bm25").engine == "sqlite"


def test_a_backend_that_cannot_share_a_database_is_refused_up_front(local_window_registry):
    registry = local_window_registry
    with pytest.raises(ConfigError, match="local_window.*per machine"):
        Bench(["local_window@postgres"], registry=registry)
    Bench(["hipporag@postgres", "hindsight@postgres", "sliding_window@postgres"], registry=registry)  # all share


@pytest.mark.postgres
def test_both_engines_in_one_run_and_a_named_database_is_left_empty(musique_dir, pg_url):
    out = CliRunner().invoke(main, [
        "bench", "scale", "--corpus", str(musique_dir), "--docs", "30,60", "--queries", "3",
        "--backend", "hybrid:embedder=hashing", "--backend", "hybrid:embedder=hashing@postgres",
        "--memory-url", pg_url, "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["results"]
    assert [(r["backend"], r["docs"]) for r in rows] == [
        ("hybrid:embedder=hashing", 30), ("hybrid:embedder=hashing", 60),
        ("hybrid:embedder=hashing@postgres", 30), ("hybrid:embedder=hashing@postgres", 60)]
    assert all(r["queries"] == 3 and r["retrieve_p95_ms"] > 0 for r in rows)
    with psycopg.connect(pg_url) as conn:  # the benchmark's docs are deleted again
        assert conn.execute("SELECT count(*) FROM retrieval_docs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM retrieval_stores").fetchone()[0] == 1
