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

from orchestrator.coding_agent.aider import AiderAgent
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
