"""A ticket end to end with `[coding_agent] kind = "opencode"`: the real `middle run` CLI, the middle
agent on the fake Messages API (the offline demo model), the real `opencode` CLI on the fake Chat
Completions API (the demo model too). The project's check fails after turn 1 and says what to
add; turn 2 resumes OpenCode's session and adds it; the ticket completes with its commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.coding_agent.opencode import INSTALL, OpenCodeAgent
from orchestrator.coding_agent.opencode_offline import PROVIDER, UNPRICED_MODEL
from orchestrator.fake_api import (
    DemoResponder,
    FakeMessagesAPI,
    ScriptedResponder,
    reply,
    text,
    tool_use,
    working_directory,
)
from orchestrator.fake_api.messages import content_text
from orchestrator.testing.check_project import check_loop_project
from orchestrator.testing.clis import require_cli
from orchestrator.workspace.git import out

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_two_turn_ticket_completes_with_its_commit_on_opencode(tmp_path):
    require_cli("opencode", INSTALL)
    repo = check_loop_project(tmp_path, EXAMPLES / "sample-repo")
    with FakeMessagesAPI(DemoResponder()) as middle_model, \
            OpenCodeAgent.offline(DemoResponder(), tmp_path / "opencode") as off:
        (tmp_path / "middle.toml").write_text(
            f'[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
            f'[agent]\nbase_url = "{middle_model.base_url}"\n'
            f'[check]\ncommands = {json.dumps([f"{sys.executable} check_fix.py"])}\n'
            f'[coding_agent]\nkind = "opencode"\n'
            f'[coding_agent.options]\nmodel = "{off.options["model"]}"\nturn_timeout_s = 120\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        env.update(off.env, ANTHROPIC_API_KEY="sk-fake-local")
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
        requests = off.requests()
    shown = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in shown, shown
    assert "complete ticket t1: 2 turn(s)" in result.stdout, shown
    assert out(repo, "show", "middle/t1:calc/other.py") == "OTHER = 1"
    assert out(repo, "show", "middle/t1:calc/fix.py") == "FIXED = True"
    # Turn 2 resumed turn 1's session: its model request carries turn 1's prompt and tool call.
    last = "\n".join(content_text(m.get("content")) for m in requests[-1]["messages"])
    assert "Create `calc/other.py` with:" in last and "Create `calc/fix.py` with:" in last
    assert [m["role"] for m in requests[-1]["messages"]].count("user") >= 4  # two prompts, two tool results
    assert middle_model.requests_for("coding_agent") == []  # OpenCode used only its own API


def test_a_local_model_opencode_has_no_price_for_is_stopped_by_the_limit_and_told_how_to_count_it_free(tmp_path):
    """OpenCode reports $0 for a model its config gives no price; served from a local address (here
    the fake's 127.0.0.1, declared inline as `middle run` declares an [agent] server) it may be free
    or a gateway to a paid API, so it is counted at the highest listed price (coding_agent/
    pricing.py): a tiny max_cost_usd stops it after its first turn, its work kept, and the run says
    once at its start how to count such a model at 0."""
    require_cli("opencode", INSTALL)
    repo = check_loop_project(tmp_path, EXAMPLES / "sample-repo")
    script = ScriptedResponder()
    script.agent(json.dumps({"prompt": "Create one.txt containing one."}),
                 json.dumps({"complete": False, "summary": "one.txt is there; two.txt is missing.",
                             "next_prompt": "Now create two.txt containing two."}))
    script.coding_agent(lambda body: reply(tool_use("Write", {"file_path": f"{working_directory(body)}/one.txt",
                                                              "content": "one\n"})),
                        reply(text("Created one.txt.")))
    with FakeMessagesAPI(script) as middle_model, OpenCodeAgent.offline(script, tmp_path / "opencode") as off:
        (tmp_path / "middle.toml").write_text(
            f'[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
            f'[agent]\nbase_url = "{middle_model.base_url}"\nmax_turns = 4\nmax_cost_usd = 0.000001\n'
            f'[coding_agent]\nkind = "opencode"\n'
            f'[coding_agent.options]\nmodel = "{PROVIDER}/{UNPRICED_MODEL}"\nturn_timeout_s = 120\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        env.update(off.env, ANTHROPIC_API_KEY="sk-fake-local")
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600)
    output = " ".join((result.stdout + result.stderr).split())
    assert "Traceback" not in output and "cost limit reached" in output, output
    said = "opencode: turns at OpenCode's own cost; a model it has no price for at the highest listed price"
    assert said in output, output
    assert output.count("served at a local address (http://127.0.0.1:") == 1, output  # said once
    assert "set price = {input = 0, output = 0}" in output, output
    assert "failed ticket t1: 1 turn(s)" in output, output
    assert out(repo, "show", "middle/t1:one.txt") == "one"
