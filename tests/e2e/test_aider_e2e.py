"""A ticket end to end with `[coding_agent] kind = "aider"`: the real `middle` CLI, the real aider on
its fake Chat Completions API, the middle agent on the fake Messages API, both answered by the
offline demo model. The project's check fails after turn 1, so turn 2 (aider's session resumed)
fixes it and the ticket completes with its commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.coding_agent.aider import AiderAgent
from orchestrator.coding_agent.aider_launch import INSTALL_HINT
from orchestrator.config.offline import FAKE_API_KEY
from orchestrator.fake_api import DemoResponder, FakeMessagesAPI
from orchestrator.fake_api.messages import content_text
from orchestrator.testing import make_repo
from orchestrator.testing.clis import require_cli
from orchestrator.workspace.git import out

pytestmark = pytest.mark.slow  # the real aider (require_cli), not Claude Code: no `cli` mark

MIDDLE = str(Path(sys.executable).with_name("middle"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHECK = """import pathlib, sys
if not pathlib.Path("calc/other.py").exists() or pathlib.Path("calc/fix.py").exists():
    sys.exit(0)
print("calc/other.py needs calc/fix.py. Create `calc/fix.py` with:\\n```python\\nFIXED = True\\n```")
sys.exit(1)
"""
TICKET = "---\ntitle: Add other\nproject: calc\nid: t1\n---\nCreate `calc/other.py` with:\n```python\nOTHER = 1\n```\n"


def test_a_ticket_on_aider_takes_two_turns_and_completes_with_its_commit(tmp_path):
    require_cli("aider", INSTALL_HINT)
    shutil.copytree(EXAMPLES / "sample-repo", tmp_path / "repo")
    (tmp_path / "repo" / "check_fix.py").write_text(CHECK)
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
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
