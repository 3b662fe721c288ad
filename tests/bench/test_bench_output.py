"""`middle bench` tables: a unit in every header, one precision per column, and progress that
starts at once and shows no embed phase for a backend that embeds nothing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.bench import runner
from orchestrator.bench.report import HEADERS
from orchestrator.bench.report import fmt as _fmt
from orchestrator.bench.report import table as _table
from orchestrator.cli.main import main
from orchestrator.testing.inmemory import InMemoryBackend


def test_each_column_has_one_precision_and_a_header_with_its_unit():
    assert [_fmt(v, "retrieve_p95_ms") for v in (3.14159, 123.456)] == ["3.1", "123.5"]
    assert [_fmt(v, "recall@5") for v in (0.5, 0.12345)] == ["0.500", "0.123"]
    assert [_fmt(v, "index_s") for v in (0.5, 12.345)] == ["0.50", "12.35"]
    assert _fmt(float("nan"), "index_s") == "-"
    for key, header in HEADERS.items():
        if key.endswith("_ms"):
            assert header.endswith("ms"), key
        if key.endswith(("_s", "_s_per_ticket")):
            assert " s" in header or header.endswith("s"), key
    table = _table("t", [{"backend": "b", "retrieve_p95_ms": 2.0}], ["backend", "retrieve_p95_ms"])
    assert [c.header for c in table.columns] == ["backend", "p95 ms"]
    table = _table("t", [{"backend": "2 worker(s)", "wall_s": 2.0}], ["backend", "wall_s"], label="workers")
    assert [c.header for c in table.columns] == ["workers", "wall s"]


def test_a_backend_that_embeds_nothing_has_no_embed_phase(tmp_path):
    phases: list[str] = []

    def track(description: str, total: int):
        phases.append(description.split(": ")[-1])
        return lambda n=1: None

    class Fake(InMemoryBackend):
        def embeds_docs(self):
            return False  # like bm25

        def warm_embeddings(self, docs):
            raise AssertionError("bm25 has nothing to embed")

    runner._index_timed(Fake(tmp_path), ["a", "b"], "bm25", track)
    assert phases == ["index"]

    class Embeds(Fake):
        warmed: list[int] = []

        def embeds_docs(self):
            return True

        def warm_embeddings(self, docs):
            self.warmed.append(len(docs))

    phases.clear()
    backend = Embeds(tmp_path)
    runner._index_timed(backend, ["x"] * 200, "dense", track)
    assert phases == ["embed", "index"] and backend.warmed == [64, 64, 64, 8]  # small steps


def test_lists_of_counts_are_checked_before_anything_starts(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from orchestrator.bench import datasets
    from orchestrator.cli.main import main

    # A clone without ../shared beside it: the argument is still the first thing checked.
    monkeypatch.setattr(datasets, "SHARED_DATA", tmp_path / "no-shared-data")
    runner = CliRunner()
    for args, name in [(["bench", "fleet", "--workers", "x"], "--workers"),
                       (["bench", "fleet", "--workers", "2,0"], "--workers"),
                       (["bench", "scale", "--docs", "-5", "--backend", "bm25"], "--docs"),
                       (["bench", "scale", "--queries", "0", "--backend", "bm25"], "--queries"),
                       (["bench", "retrieval", "--limit", "0", "--backend", "bm25"], "--limit"),
                       (["bench", "memory", "--conversations", "-1", "--backend", "bm25"], "--conversations"),
                       (["bench", "tickets", "--last", "0", "--backend", "bm25"], "--last"),
                       (["bench", "tickets", "--before-last", "-3", "--backend", "bm25"], "--before-last")]:
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and name in result.output and "at least 1" in result.output, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
    for bad in ("x", "0,-5"):  # 0 blocked is a count (the baseline), a negative one is not
        result = runner.invoke(main, ["bench", "fleet", "--blocked", bad])
        assert result.exit_code == 2 and "--blocked" in result.output and "0,1000,5000" in result.output, result.output


def test_bench_words_reports_each_length_and_the_ratio():
    from click.testing import CliRunner

    from orchestrator.cli.main import main

    result = CliRunner().invoke(main, ["bench", "words", "--backend", "bm25", "--backend",
                                       "sliding_window", "--lengths", "1000,5000", "--json",
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kind"] == "long words" and report["lengths"] == [1000, 5000]
    assert [row["backend"] for row in report["results"]] == ["bm25", "sliding_window"]
    for row in report["results"]:
        for key in ("index_ms@1000", "index_ms@5000", "retrieve_ms@1000", "retrieve_ms@5000"):
            assert row[key] > 0
        assert row["index_ratio"] == row["index_ms@5000"] / row["index_ms@1000"]
    bad = CliRunner().invoke(main, ["bench", "words", "--backend", "bm25", "--lengths", "0"])
    assert bad.exit_code == 2 and "--lengths" in bad.output


@pytest.mark.parametrize("args, says", [
    (["retrieval"], "MuSiQue-100"), (["memory"], "LoCoMo"), (["tickets"], "--repo PATH"),
    (["decisions"], "sde-bench"),
])
def test_without_the_data_the_bench_says_what_it_wanted_and_how_to_give_it(tmp_path, monkeypatch, args, says):
    from orchestrator.bench import datasets

    monkeypatch.setattr(datasets, "SHARED_DATA", tmp_path / "no-shared" / "data")
    result = CliRunner().invoke(main, ["bench", *args, "--backend", "bm25"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error:"), result.output
    text = " ".join(result.output.split())
    assert says in text and "--dataset" in text and "docs/benchmarks.md" in text
