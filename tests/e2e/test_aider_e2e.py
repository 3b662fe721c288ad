"""A ticket end to end with `[coding_agent] kind = "aider"`: the real `middle` CLI, the real aider on
its fake Chat Completions API, the middle agent on the fake Messages API, both answered by the
offline demo model. The project's check fails after turn 1, so turn 2 (aider's session resumed)
fixes it and the ticket completes with its commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import decide, done, fresh_project, plan, write_file

from orchestrator.coding_agent.aider import UNPRICED_MODEL, AiderAgent
from orchestrator.coding_agent.aider_launch import INSTALL_HINT
from orchestrator.config.offline import FAKE_API_KEY
from orchestrator.fake_api import DemoResponder, FakeMessagesAPI
from orchestrator.fake_api.messages import content_text
from orchestrator.testing.check_project import check_loop_project
from orchestrator.testing.clis import require_cli
from orchestrator.workspace.git import out

pytestmark = pytest.mark.slow  # the real aider (require_cli), not Claude Code: no `cli` mark

MIDDLE = str(Path(sys.executable).with_name("middle"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_ticket_on_aider_takes_two_turns_and_completes_with_its_commit(tmp_path):
    require_cli("aider", INSTALL_HINT)
    repo = check_loop_project(tmp_path, EXAMPLES / "sample-repo")
    with FakeMessagesAPI(DemoResponder()) as agent_api, \
            AiderAgent.offline(DemoResponder(), tmp_path / "aider-offline") as aider:
        options = {**aider.options, "turn_timeout_s": 300}
        (tmp_path / "middle.toml").write_text(
            '[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
            '[check]\ncommands = ["python check_fix.py"]\n'
            '[coding_agent]\nkind = "aider"\n[coding_agent.options]\n'
            + "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items()))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        env.update(aider.env, ANTHROPIC_BASE_URL=agent_api.base_url, ANTHROPIC_API_KEY=FAKE_API_KEY)
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
        requests = aider.requests()
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert "complete ticket t1: 2 turn(s)" in result.stdout, result.stdout
    # The commit holds both turns' files and nothing of aider's.
    assert out(repo, "show", "middle/t1:calc/other.py") == "OTHER = 1"
    assert out(repo, "show", "middle/t1:calc/fix.py") == "FIXED = True"
    tree = out(repo, "ls-tree", "-r", "--name-only", "middle/t1").splitlines()
    assert not [path for path in tree if ".aider" in path], tree
    # Turn 2 resumed aider's session: its model request carries turn 1.
    last = "\n".join(content_text(m["content"]) for m in requests[-1]["messages"])
    assert "Create `calc/other.py` with:" in last and "calc/fix.py" in last


def test_max_cost_usd_stops_a_ticket_on_a_model_aider_has_no_price_for(tmp_path, fake_api):
    """aider reports no cost for a model missing from its price list (a local or custom one): its
    turns are priced from their tokens at `price` (coding_agent/pricing.py), which wins over the
    price a model on a local address (the fake's 127.0.0.1) is counted at otherwise, so the
    spending limit holds: after turn 1 the ticket stops, its work kept."""
    require_cli("aider", INSTALL_HINT)
    repo = fresh_project(tmp_path, {"t1.md": "---\ntitle: Two files\nproject: calc\nid: t1\n---\n"
                                             "Create one.txt, then two.txt.\n"})
    script = fake_api.script
    script.agent(plan("Create one.txt containing one."),
                 decide(False, "one.txt is there; two.txt is missing.", "Now create two.txt containing two."))
    script.coding_agent(write_file("one.txt", "one\n"), done("Created one.txt."))
    with AiderAgent.offline(script, tmp_path / "aider-offline") as aider:
        options = {**aider.options, "model": UNPRICED_MODEL, "turn_timeout_s": 300}
        (tmp_path / "middle.toml").write_text(
            '[project]\npath = "repo"\n[memory]\nbackend = "none"\n[agent]\nmax_turns = 4\nmax_cost_usd = 0.000001\n'
            '[coding_agent]\nkind = "aider"\n[coding_agent.options]\n'
            + "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
            + "price = {input = 1.0, output = 2.0}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        env.update(aider.env, ANTHROPIC_BASE_URL=fake_api.base_url, ANTHROPIC_API_KEY=FAKE_API_KEY)
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
    output = " ".join((result.stdout + result.stderr).split())
    assert "Traceback" not in output and "Cost: $" not in output, output  # aider priced nothing itself
    assert "cost limit reached" in output and "local address" not in output, output
    assert "failed ticket t1: 1 turn(s)" in output and "turn 2" not in output, output
    assert script.pending("coding_agent") == 0
    assert out(repo, "show", "middle/t1:one.txt") == "one"  # the turn's work is kept on its branch
