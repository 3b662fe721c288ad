"""`middle bench runs` reports how often the middle agent used the memories its recalls showed it
(issue 31): a whole `middle run --fake` of a small backlog, the real Claude Code CLI on the fake
model, whose demo model names the memories its ticket shares words with."""

from __future__ import annotations

import pytest

from orchestrator.bench.run_bench import measure_once
from orchestrator.cli.examples import examples_dir

pytestmark = [pytest.mark.cli, pytest.mark.slow]


def test_a_measured_run_counts_the_memories_recalled_and_used_per_backend(claude_cli):
    result = measure_once(3, 1, examples_dir(), claude_cli)
    assert result["complete"] == 3
    # Tickets 2 and 3 recall the earlier "Add module" tickets and share their words.
    assert result["memories_recalled"] >= 3 and 1 <= result["memories_used"] <= result["memories_recalled"]
    (backend,) = result["use_by_backend"]
    assert backend == "bm25" and result["use_by_backend"]["bm25"]["used"] == result["memories_used"]


def test_a_measured_run_with_a_check_reports_its_time_and_corrections(claude_cli):
    import sys

    check = f"{sys.executable} -c \"import time; time.sleep(0.2)\""
    result = measure_once(2, 1, examples_dir(), claude_cli, checks=(check,))
    assert result["complete"] == 2 and result["corrections"] == 0
    assert result["check_s_per_ticket"] >= 0.2  # at least each ticket's final check (the base one is shared)
    plain = measure_once(1, 1, examples_dir(), claude_cli)
    assert plain["check_s_per_ticket"] == 0 and plain["corrections"] == 0
