"""A team with only a local model server (Ollama, vLLM, LM Studio): `[agent] provider =
"openai-compatible"` is the one line, and OpenCode or aider as the coding agent follow it to the
same server and model (their `follow_provider`). One fake Chat Completions server answers both
agents, each from the offline demo model; a ticket completes with its commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.fake_api import DemoResponder
from orchestrator.testing import make_repo
from orchestrator.testing.clis import require_cli
from orchestrator.workspace.git import out

pytestmark = pytest.mark.slow

MIDDLE = str(Path(sys.executable).with_name("middle"))
TICKET = ("---\ntitle: Add notes\nproject: calc\nid: t1\n---\nCreate `calc/notes.py` with:\n"
          "```python\nNOTES = 1\n```\n")


def project(tmp_path: Path, base_url: str, model: str, coding: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text("")
    make_repo(repo)
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    (tmp_path / "middle.toml").write_text(
        f'[project]\npath = "repo"\n[memory]\nbackend = "none"\n'
        f'[agent]\nprovider = "openai-compatible"\nbase_url = "{base_url}"\nmodel = "{model}"\nmax_turns = 3\n'
        f"{coding}")
    return repo


def run(tmp_path: Path, env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_", "OPENAI_"))}
    result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env={**clean, **env}, text=True, capture_output=True,
                            timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output
    assert "complete ticket t1: 1 turn(s)" in " ".join(output.split()), output
    return output


def test_opencode_follows_the_middle_agents_local_server(tmp_path):
    from orchestrator.coding_agent.opencode import INSTALL
    from orchestrator.coding_agent.opencode_offline import offline_home
    from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI

    require_cli("opencode", INSTALL)
    with FakeChatCompletionsAPI(DemoResponder()) as server:
        repo = project(tmp_path, server.base_url, "qwen-local",
                       '[coding_agent]\nkind = "opencode"\n[coding_agent.options]\nturn_timeout_s = 300\n')
        # OpenCode's home kept off the machine and the network; its own config names another
        # provider, so only following [agent] gets it to the model it used.
        env = offline_home(tmp_path / "opencode-home", "http://127.0.0.1:9/v1", "unused")
        run(tmp_path, env)
        models = {r.body.get("model") for r in server.requests_for("coding_agent")}
        agent_calls = server.requests_for("agent")
    assert models == {"qwen-local"} and len(agent_calls) >= 2  # one server, one model, both agents
    assert out(repo, "show", "middle/t1:calc/notes.py") == "NOTES = 1"


def test_aider_follows_the_middle_agents_local_server(tmp_path):
    from orchestrator.coding_agent.aider import AiderAgent
    from orchestrator.coding_agent.aider_launch import INSTALL_HINT

    require_cli("aider", INSTALL_HINT)
    with AiderAgent.offline(DemoResponder(), tmp_path / "aider-offline") as aider:
        base_url = aider.options["openai_api_base"]
        # aider's offline options without its model and server: those come from [agent]
        options = {k: v for k, v in aider.options.items() if k not in ("model", "openai_api_base")}
        options["turn_timeout_s"] = 300
        repo = project(tmp_path, base_url, "fake-aider", '[coding_agent]\nkind = "aider"\n[coding_agent.options]\n'
                       + "".join(f"{k} = {json.dumps(v)}\n" for k, v in options.items()))
        env = {k: v for k, v in aider.env.items() if k != "OPENAI_API_KEY"}  # a local server needs no key
        run(tmp_path, env)
        coding = aider.requests()
    assert coding  # aider's own requests reached the server [agent] names
    assert out(repo, "show", "middle/t1:calc/notes.py") == "NOTES = 1"
