"""A two-turn ticket end to end with `[coding_agent] kind = "gemini"`: `middle run` (the real CLI
entry point) on a small git repo, the middle agent on the fake Messages API, the real Gemini CLI
on the fake Gemini API, both scripted from one ScriptedResponder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import decide, done, plan, write_file

from orchestrator.coding_agent.gemini import INSTALL_COMMAND, GeminiAgent
from orchestrator.fake_api.messages import content_text
from orchestrator.testing import make_repo
from orchestrator.testing.clis import require_cli
from orchestrator.workspace.git import out
from tickets.store import TicketStore

pytestmark = pytest.mark.slow  # the real Gemini CLI: seconds a turn


TICKET = "---\ntitle: Two files\nproject: calc\nid: t1\n---\nCreate a.txt, then b.txt.\n"


def test_a_two_turn_ticket_completes_with_its_commit_on_the_gemini_cli(tmp_path, fake_api):
    require_cli("gemini", INSTALL_COMMAND)
    repo = make_repo(tmp_path / "repo", {"README.md": "# calc\n"})
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(TICKET)
    fake_api.script.agent(plan("Create a.txt containing a."),
                          decide(False, next_prompt="Now create b.txt containing b."),
                          decide(True, "Created a.txt and b.txt."))
    fake_api.script.coding_agent(write_file("a.txt", "a\n"), done("Created a.txt."),
                                 write_file("b.txt", "b\n"), done("Created b.txt."))
    with GeminiAgent.offline(fake_api.script, tmp_path / "gemini") as off:
        options = "".join(f'{k} = "{v}"\n' for k, v in off.options.items())
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\ntickets_dir = "tickets"\n'
            f'[coding_agent]\nkind = "gemini"\n[coding_agent.options]\n{options}turn_timeout_s = 120\n')
        # The middle agent (the anthropic SDK) reads the fake Messages API's address from the env.
        env = {**os.environ, **off.env, "ANTHROPIC_BASE_URL": fake_api.base_url,
               "ANTHROPIC_API_KEY": "sk-fake-local", "ANTHROPIC_AUTH_TOKEN": ""}
        middle = Path(sys.executable).with_name("middle")
        proc = subprocess.run([str(middle), "run", "t1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        gemini_requests = off.requests()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "complete" in proc.stdout and "ticket t1" in proc.stdout, proc.stdout
    # No model request went to the fake Messages API from the coding agent: all came to Gemini's.
    assert fake_api.requests_for("coding_agent") == [] and len(fake_api.requests_for("agent")) == 3
    assert len(gemini_requests) == 4
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        run = store.latest_run("t1")
        turns = store.list_turns(ticket_id="t1")
    assert run["status"] == "complete", run
    assert [(t["turn_no"], t["status"], t["response"]) for t in turns] == [
        (1, "done", "Created a.txt."), (2, "done", "Created b.txt.")]
    assert turns[0]["session_id"] == turns[1]["session_id"]  # turn 2 resumed turn 1's session
    turn_two = "\n".join(content_text(m.get("content")) for m in gemini_requests[2]["messages"])
    assert "Create a.txt containing a." in turn_two and "Now create b.txt containing b." in turn_two
    # The ticket's work is committed on its branch; the user's checkout is untouched.
    assert out(repo, "show", "middle/t1:a.txt") == "a" and out(repo, "show", "middle/t1:b.txt") == "b"
    assert not (repo / "a.txt").exists() and out(repo, "status", "--porcelain") == ""


def test_the_offline_demo_runs_on_the_gemini_cli(tmp_path):
    require_cli("gemini", INSTALL_COMMAND)
    demo = tmp_path / "demo"
    middle = Path(sys.executable).with_name("middle")
    proc = subprocess.run([str(middle), "demo", "--agent", "gemini", "--no-memory", "--dir", str(demo)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tid in ("001-greeting", "002-farewell", "003-multiply"):
        assert f"complete ticket {tid}" in proc.stdout, proc.stdout
    assert "▸ write_file" in proc.stdout  # the Gemini CLI's own tool wrote each file
    assert (demo / "repo" / "calc" / "farewell.py").read_text().count("Goodbye") == 1
    # The CLI's home (settings, sessions) is the demo's, under its state dir.
    assert list((demo / ".middle" / "offline" / "gemini" / "gemini-home" / ".gemini" / "tmp").glob("*/chats/*.jsonl"))


def mixed_ticket(tid: str, agent: str, path: str, word: str) -> str:
    return (f"---\ntitle: {word}\nproject: calc\nid: {tid}\ncoding_agent: {agent}\n---\n"
            f"Create `{path}` with:\n```text\n{word}\n```\n")


def test_a_batch_whose_tickets_name_claude_code_and_gemini_runs_each_on_its_own(tmp_path, claude_cli):
    """Offline (`--fake`): the middle agent and Claude Code on the fake Messages API, the Gemini
    CLI on its own fake Gemini API, all answered by the demo model."""
    require_cli("gemini", INSTALL_COMMAND)
    repo = make_repo(tmp_path / "repo", {"README.md": "# calc\n"})
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "t1.md").write_text(mixed_ticket("t1", "claude-code", "one.txt", "one"))
    (tmp_path / "tickets" / "t2.md").write_text(mixed_ticket("t2", "gemini", "two.txt", "two"))
    (tmp_path / "middle.toml").write_text('state_dir = "state"\n[project]\npath = "repo"\ntickets_dir = "tickets"\n'
                                          '[memory]\nbackend = "none"\n')
    middle = Path(sys.executable).with_name("middle")
    proc = subprocess.run([str(middle), "run", "--fake", "t1", "t2"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "complete ticket t1" in proc.stdout and "complete ticket t2" in proc.stdout, proc.stdout
    assert "▸ write_file" in proc.stdout and "▸ Write" in proc.stdout  # each agent's own tool
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        agents = {t: [turn["coding_agent"] for turn in store.list_turns(ticket_id=t)] for t in ("t1", "t2")}
    assert agents == {"t1": ["claude-code"], "t2": ["gemini"]}
    assert out(repo, "show", "middle/t1:one.txt") == "one" and out(repo, "show", "middle/t2:two.txt") == "two"
