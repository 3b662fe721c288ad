"""`middle bench retrieval --openie SOURCE` reaches backends with an `openie` option, and only them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator.bench import cli as bench_cli
from orchestrator.bench import runner
from orchestrator.errors import ConfigError


def test_shared_options_go_only_to_backends_that_have_them():
    bench = runner.Bench(["dense", "hipporag", "hipporag:openie=offline,fact_top_k=3"],
                         shared_options={"openie": "precomputed:/some/file.json"})
    dense, graph, explicit = bench.specs
    assert dense.options == {}
    assert graph.options == {"openie": "precomputed:/some/file.json"}
    assert explicit.options == {"openie": "offline", "fact_top_k": 3}  # a spec's own value wins
    assert [s.label for s in bench.specs] == ["dense", "hipporag",
                                              "hipporag:openie=offline,fact_top_k=3"]


def test_a_bad_openie_value_fails_before_any_work():
    with pytest.raises(ConfigError, match="openie"):
        runner.Bench(["hipporag"], shared_options={"openie": "nonsense"})


def test_retrieval_command_passes_openie_through(monkeypatch, tmp_path):
    seen = {}

    def fake_run(dataset, backends, **kwargs):
        seen.update(kwargs)
        return {"dataset": str(dataset), "kind": "retrieval", "results": []}

    monkeypatch.setattr(runner, "run_retrieval", fake_run)
    result = CliRunner().invoke(bench_cli.bench, ["retrieval", "--dataset", str(tmp_path),
                                                  "--backend", "hipporag", "--openie",
                                                  "precomputed:x.json", "--json"])
    assert result.exit_code == 0, result.output
    assert seen["shared_options"] == {"openie": "precomputed:x.json"}
