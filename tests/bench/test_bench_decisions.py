"""`middle bench decisions`: decision recall per set (hit@1, hit@5, MRR@10), the amended pair
indexed in order, how often the superseded rule ranks above its amendment, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.bench.decisions import index_order, load_decisions, run_decisions
from orchestrator.cli.main import main
from orchestrator.errors import ConfigError

DECOYS = [f"User: how do I use the {w} helper?\nAssistant: call {w}() with a list."
          for w in ("zip", "chunk", "window", "pairwise", "unique", "flatten")]
RULE = ("User: cache keys must stay strings.\nAssistant: agreed, the cache rejects integer keys "
        "on purpose; integer cache keys raise TypeError.")
OLD = ("User: the retry helper sleeps one second between attempts, fixed.\nAssistant: yes, the "
       "retry delay is fixed; retry attempts never back off.")
NEW = "User: changed our mind: back off exponentially instead.\nAssistant: done."


@pytest.fixture
def decisions_file(tmp_path) -> Path:
    docs = [*DECOYS, RULE]
    amended = [*DECOYS, RULE, OLD, NEW]
    data = {"name": "mini", "sets": {
        "conversation": {"docs": docs, "queries": [
            {"task": "t1", "category": "c", "query": "integer cache keys raise TypeError",
             "gold": [6], "stale": []},
            {"task": "t2", "category": "c", "query": "flatten nested lists", "gold": [5]}]},
        "amended": {"docs": amended, "queries": [
            {"task": "t3", "category": "c", "query": "retry attempts: what delay between them?",
             "gold": [8], "stale": [7]}]}}}
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(data))
    return path


def test_the_superseded_doc_is_indexed_before_its_amendment_whatever_the_shuffle(decisions_file):
    (_, amended) = load_decisions(decisions_file)
    for seed in range(20):
        order = index_order(amended, seed)
        assert sorted(order) == list(range(len(amended.docs)))
        assert order.index(7) < order.index(8)
    assert index_order(amended, 7) == index_order(amended, 7)  # seeded: the same each run
    assert len({tuple(index_order(amended, s)) for s in range(5)}) > 1


def test_scores_per_set_and_the_stale_rule_first(decisions_file):
    report = run_decisions(decisions_file, ["bm25"])
    assert report["kind"] == "decisions" and report["seed"] == 7
    conv, amended = report["results"]
    assert (conv["set"], conv["queries"], conv["docs"]) == ("conversation", 2, 7)
    assert conv["hit@1"] == conv["hit@5"] == conv["mrr@10"] == 1.0
    assert conv["amended"] == 0 and conv["stale_first"] == 0
    # BM25 matches the old rule's words ("retry", "attempts", "delay"): the stale rule first.
    (task,) = amended["tasks"]
    assert task["stale_rank"] == 1 and task["gold_rank"] != 1 and task["stale_first"]
    assert amended["amended"] == 1 and amended["stale_first"] == 1
    assert amended["hit@1"] == 0.0


@pytest.mark.parametrize("data, message", [
    ([1], "no 'sets' key"),
    ({"sets": {"a": {"docs": [], "queries": []}}}, "non-empty list of texts"),
    ({"sets": {"a": {"docs": ["x"], "queries": [{"query": "q", "gold": [3]}]}}},
     "doc indices from 0 to 0"),
    ({"sets": {"a": {"docs": ["x"], "queries": [{"query": "q", "gold": []}]}}}, "no gold doc"),
    ({"sets": {"a": {"docs": ["x"], "queries": [{"gold": [0]}]}}}, "no 'query' key"),
])
def test_a_wrong_shape_names_the_file_and_the_place(tmp_path, data, message):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message) as info:
        load_decisions(bad)
    assert str(bad) in str(info.value)


def test_cli_table_json_and_one_line_errors(decisions_file, tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["bench", "decisions", "--dataset", str(decisions_file),
                               "--backend", "bm25", "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert [r["set"] for r in report["results"]] == ["conversation", "amended"]
    assert {"hit@1", "hit@5", "mrr@10", "stale_first", "tasks"} <= set(report["results"][0])
    table = runner.invoke(main, ["bench", "decisions", "--dataset", str(decisions_file),
                                 "--backend", "bm25", "--no-progress"])
    assert table.exit_code == 0 and "hit@1" in table.stdout and "1 of 1" in table.stdout
    missing = tmp_path / "missing.json"
    for args, message in [(["--dataset", str(missing), "--backend", "bm25"], "does not exist"),
                          # the backend is checked before the (missing) file is read
                          (["--dataset", str(missing), "--backend", "nosuch"], "nosuch")]:
        failed = runner.invoke(main, ["bench", "decisions", *args, "--no-progress"])
        assert failed.exit_code == 1, failed.output
        lines = [ln for ln in failed.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
