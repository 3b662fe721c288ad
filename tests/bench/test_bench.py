"""`middle bench`: datasets, metrics, the three runs and the CLI, on small synthetic data."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.bench import datasets, run_memory, run_retrieval, run_scale
from orchestrator.bench.metrics import percentile, recall_at_k
from orchestrator.bench.runner import BackendSpec
from orchestrator.cli.main import main
from orchestrator.errors import ConfigError


def test_recall_and_percentiles():
    assert recall_at_k(["a", "b", "c"], {"b", "z"}, 1) == 0.0
    assert recall_at_k(["a", "b", "c"], {"b", "z"}, 2) == 0.5
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5.0], 95) == 5.0


def test_backend_spec_parses_options_as_json():
    spec = BackendSpec.parse("hybrid:fusion=rrf,dense_weight=0.3,mmr_lambda=null")
    assert (spec.name, spec.options) == ("hybrid", {"fusion": "rrf", "dense_weight": 0.3,
                                                    "mmr_lambda": None})
    with pytest.raises(ConfigError, match="NAME:key=value"):
        BackendSpec.parse("hybrid:fusion")


def test_retrieval_run_measures_recall_per_backend(musique_dir):
    report = run_retrieval(musique_dir, ["bm25", "hybrid:embedder=hashing"])
    assert report["kind"] == "retrieval" and report["dataset"] == str(musique_dir)
    bm25, hybrid = report["results"]
    assert [bm25["backend"], hybrid["backend"]] == ["bm25", "hybrid:embedder=hashing"]
    for row in (bm25, hybrid):
        assert row["docs"] == 12 and row["queries"] == 3
        assert row["recall@2"] <= row["recall@5"] <= row["recall@10"] == 1.0
        assert row["retrieve_p50_ms"] <= row["retrieve_p95_ms"]
        assert 0 <= row["retrieve_cpu_p50_ms"] <= row["retrieve_cpu_p95_ms"]
        assert row["index_s"] >= 0 and row["store_mb"] > 0
    # The single-gold questions name their passage's title: BM25 ranks it first.
    assert bm25["recall@2"] >= 2 / 3


def test_memory_run_counts_evidence_turns_by_category(locomo_file):
    report = run_memory(locomo_file, ["bm25", "hybrid:embedder=hashing"])
    assert report["conversations"] == ["conv-test"]
    bm25, hybrid = report["results"]
    assert bm25["timestamps"] == hybrid["timestamps"] == "index_records"
    assert bm25["turns"] == 5 and bm25["questions"] == 3  # the D9:9 question names no turn
    assert set(bm25["by_category"]) == {"single-hop", "multi-hop", "adversarial"}
    # "Thanks!" is said twice: the one doc stands for both turns, so D2:2 is found.
    assert bm25["by_category"]["adversarial"]["recall@10"] == 1.0
    assert bm25["by_category"]["single-hop"]["recall@2"] == 1.0  # "cat" is only in D1:1
    assert bm25["recall@10"] == 1.0  # 5 turns, k = 10: everything is in reach


def test_memory_run_prefixes_dates_for_backends_without_index_records(locomo_file):
    from orchestrator.bench import runner

    # sliding_window keeps times now (an edit keeps a doc's place): its turns go in with them;
    # a backend that keeps none gets its docs' dates in their text (timed=False below)
    report = run_memory(locomo_file, ["sliding_window"])
    assert report["results"][0]["timestamps"] == "index_records"
    docs, records, ids_of = runner._memory_docs(datasets.load_memory(locomo_file)[0], timed=False)
    assert records is None
    assert docs[0] == "[1:56 pm on 8 May, 2023] Ana: I adopted a grey cat named Pixel."
    assert docs[3].endswith("[shares a photo of a cello case]")
    assert ids_of["[10:00 am on 2 June, 2023] Ana: Thanks!"] == {"D2:2"}


def test_scale_run_reports_each_size(musique_dir):
    streamed: list[dict] = []
    report = run_scale(musique_dir, ["bm25"], [40, 90], queries=3, on_result=streamed.append)
    rows = report["results"]
    assert streamed == rows
    assert [(r["docs"], r["added"]) for r in rows] == [(40, 40), (90, 50)]
    for row in rows:
        assert row["queries"] == 3 and row["retrieve_p50_ms"] <= row["retrieve_p95_ms"]
        assert row["index_per_1k_s"] > 0 and row["store_mb"] > 0


def test_synthetic_docs_are_distinct_real_sentences():
    passages = [datasets.passage_text(t, x) for t, x in
                [("A", "One fact. Two facts. Red fact."), ("B", "Blue sky. Green sea.")]]
    docs = datasets.synthetic_docs(passages, 30)
    assert len(docs) == len(set(docs)) == 30
    assert all(d.startswith(("A: ", "B: ")) for d in docs)
    with pytest.raises(ConfigError, match="could only make"):
        datasets.synthetic_docs(passages, 200)


@pytest.mark.parametrize("mutate, message", [
    (lambda q, c: c[0].pop("title"), "corpus.json: passage 0 has no 'title' key"),
    (lambda q, c: q[1].pop("paragraphs"), "questions.json: question 1 has no 'paragraphs' key"),
    (lambda q, c: q[0]["paragraphs"][0].update(is_supporting="yes"),
     "is_supporting'] should be bool"),
    (lambda q, c: c.pop(0), "supporting paragraphs of questions.json are not in corpus.json"),
])
def test_malformed_retrieval_dataset_names_file_and_key(musique_dir, mutate, message):
    q = json.loads((musique_dir / "questions.json").read_text())
    c = json.loads((musique_dir / "corpus.json").read_text())
    mutate(q, c)
    (musique_dir / "questions.json").write_text(json.dumps(q))
    (musique_dir / "corpus.json").write_text(json.dumps(c))
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        datasets.load_retrieval(musique_dir)


def test_malformed_memory_dataset_names_file_and_key(tmp_path, locomo_file):
    data = json.loads(locomo_file.read_text())
    del data[0]["conversation"]["session_2"][0]["dia_id"]
    locomo_file.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        datasets.load_memory(locomo_file)
    assert str(locomo_file) in str(err.value) and "session_2 turn 0 has no 'dia_id'" in str(err.value)
    (tmp_path / "not-json.json").write_text("{oops")
    with pytest.raises(ConfigError, match="not readable JSON"):
        datasets.load_memory(tmp_path / "not-json.json")


def test_cli_json_and_table(musique_dir):
    runner = CliRunner()
    out = runner.invoke(main, ["bench", "retrieval", "--dataset", str(musique_dir), "--backend",
                               "bm25", "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["results"][0]["backend"] == "bm25" and "recall@5" in report["results"][0]
    table = runner.invoke(main, ["bench", "retrieval", "--dataset", str(musique_dir),
                                 "--backend", "bm25", "--no-progress"])
    assert table.exit_code == 0 and "R@5" in table.output and "bm25" in table.output


def test_cli_errors_are_one_line(tmp_path, musique_dir):
    runner = CliRunner()
    out = runner.invoke(main, ["bench", "retrieval", "--dataset", str(tmp_path), "--backend", "bm25"])
    assert out.exit_code == 1 and "corpus.json does not exist" in out.output
    out = runner.invoke(main, ["bench", "memory", "--dataset", str(tmp_path / "x.json"),
                               "--backend", "nope"])
    assert out.exit_code == 1 and "unknown memory backend 'nope'" in out.output
    out = runner.invoke(main, ["bench", "retrieval", "--dataset", str(musique_dir),
                               "--backend", "hybrid:no_such_option=1"])
    assert out.exit_code == 1 and "no_such_option" in out.output


@pytest.mark.slow
def test_real_shared_data_slices(shared_data):
    """A small slice of ../shared/data, to catch loaders drifting from the real files."""
    root = datasets.SHARED_DATA
    shared_data("musique100"), shared_data("locomo")
    report = run_retrieval(root / "musique100", ["bm25"], limit=20)
    assert report["results"][0]["docs"] == 1890 and report["results"][0]["recall@10"] > 0.3
    memory = run_memory(root / "locomo" / "locomo_dev5.json", ["bm25"], conversations=1)
    row = memory["results"][0]
    assert row["turns"] > 300 and row["questions"] > 100 and row["recall@10"] > 0.3
    assert set(row["by_category"]) == set(datasets.LOCOMO_CATEGORIES.values())
