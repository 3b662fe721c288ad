"""The real Claude Code CLI against the fake: scripted Write calls and the demo model create real files."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from orchestrator.fake_api import (
    DemoResponder,
    FakeMessagesAPI,
    claude_code_env,
    reply,
    text,
    tool_use,
    working_directory,
)

pytestmark = pytest.mark.cli


def run_claude(cli, prompt, cwd, env):
    cmd = [cli, "-p", prompt, "--output-format", "stream-json", "--verbose",
           "--permission-mode", "acceptEdits", "--allowedTools", "Write,Read,Edit"]
    proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, lines


def test_scripted_write_creates_the_file(claude_cli, fake_api, claude_env, tmp_path):
    fake_api.script.coding_agent(
        lambda body: reply(text("Creating it."),
                           tool_use("Write", {"file_path": f"{working_directory(body)}/notes/hello.txt",
                                              "content": "hello from the fake\n"})),
        "Created notes/hello.txt.")
    proc, lines = run_claude(claude_cli, "Create notes/hello.txt", tmp_path, claude_env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "notes" / "hello.txt").read_text() == "hello from the fake\n"
    result = lines[-1]
    assert result["type"] == "result" and result["is_error"] is False
    assert result["result"] == "Created notes/hello.txt."
    assert result["total_cost_usd"] > 0  # computed from the usage the fake reports
    worker = fake_api.requests_for("coding_agent")
    assert len(worker) == 2 and fake_api.requests_for("agent") == []
    assert worker[0].query.get("beta") == "true"
    assert working_directory(worker[0].body) == os.path.realpath(tmp_path)
    # The second request carries Claude Code's tool_result for our tool_use id.
    tool_id = worker[0].reply["content"][1]["id"]
    results = [b for m in worker[1].body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [tool_id]


def test_demo_responder_drives_the_cli_to_create_a_file(claude_cli, tmp_path):
    prompt = "Add a greeting module.\n\nCreate `pkg/greet.py` with:\n\n```python\ndef greet():\n    return 'hi'\n```\n"
    with FakeMessagesAPI(DemoResponder()) as fake:
        env = claude_code_env(fake.base_url, tmp_path / "config", max_retries=0)
        project = tmp_path / "project"
        project.mkdir()
        proc, lines = run_claude(claude_cli, prompt, project, env)
    assert proc.returncode == 0, proc.stderr
    assert (project / "pkg" / "greet.py").read_text() == "def greet():\n    return 'hi'\n"
    assert lines[-1]["result"] == "Created pkg/greet.py."
