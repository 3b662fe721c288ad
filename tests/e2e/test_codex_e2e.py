"""One ticket end to end on the Codex CLI: `middle run` with `[coding_agent] kind = "codex"`, the
middle agent on the fake Messages API and Codex on the fake Responses API, both answering from one
script; two Codex turns (the second resuming the first's session), then `complete` with its commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import decide, done, fresh_project, plan, write_file

from orchestrator.coding_agent.codex import INSTALL, CodexAgent
from orchestrator.fake_api import claude_code_env
from orchestrator.testing.clis import require_cli
from orchestrator.workspace.git import branch_commit, out

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
TICKET = "---\ntitle: Two files\nproject: calc\nid: t1\n---\nCreate one.txt, then two.txt.\n"


def toml_table(name: str, values: dict) -> str:
    """`[name]` with `values` (strings, numbers, lists as JSON, which TOML reads the same; dicts as subtables)."""
    lines = [f"[{name}]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items() if not isinstance(v, dict)]
    tables = [toml_table(f"{name}.{k}", v) for k, v in values.items() if isinstance(v, dict)]
    return "\n".join(lines) + "\n" + "".join(tables)


def run_two_turns(tmp_path: Path, fake_api, after_turn_one=None):
    """`middle run` of TICKET on Codex: turn 1 writes one.txt, the middle agent asks for two.txt, turn 2
    writes it. `after_turn_one(codex_home)` runs as turn 1 ends. Returns the run's result and the
    canonical bodies Codex sent."""
    require_cli("codex", INSTALL)
    repo = fresh_project(tmp_path, {"t1.md": TICKET})
    base = branch_commit(repo, "main")
    assert base is not None
    script = fake_api.script
    home = tmp_path / "codex" / "codex-home"

    def turn_one_done(body):
        if after_turn_one is not None:
            after_turn_one(home)
        return done("Created one.txt.")

    script.agent(plan("Create one.txt containing one."),
                 decide(False, "one.txt is there; two.txt is missing.", "Now create two.txt containing two."),
                 decide(True, "Created one.txt and two.txt."))
    script.coding_agent(write_file("one.txt", "one\n"), turn_one_done,
                        write_file("two.txt", "two\n"), done("Created two.txt."))
    with CodexAgent.offline(script, tmp_path / "codex") as offline:
        assert offline.env["CODEX_HOME"] == str(home)
        options = {**offline.options, "turn_timeout_s": 120}
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 4\n'
            '[coding_agent]\nkind = "codex"\n' + toml_table("coding_agent.options", options))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"), **offline.env}
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True,
                                timeout=300)
        codex_requests = offline.requests()
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output
    assert "complete ticket t1: 2 turn(s)" in " ".join(output.split()), output
    assert "planned the first prompt for Codex" in output and "turn 2: Codex is working" in output, output
    log = subprocess.run([MIDDLE, "log", "t1"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)
    assert "prompt to Codex" in log.stdout and "Codex response" in log.stdout, log.stdout + log.stderr
    # The commit on the ticket's branch holds both turns' files; main is untouched.
    assert out(repo, "show", "middle/t1:one.txt") == "one" and out(repo, "show", "middle/t1:two.txt") == "two"
    assert branch_commit(repo, "main") == base
    changed = out(repo, "diff", "--name-only", base, "middle/t1").split()
    assert changed == ["one.txt", "two.txt"]  # nothing of Codex's own (sessions, temp files) committed
    return result, codex_requests


def texts(body: dict) -> list[str]:
    return [b.get("text") for m in body["messages"] for b in m["content"] if b["type"] == "text"]


def test_a_two_turn_ticket_on_codex_reaches_complete_with_its_commit(tmp_path, fake_api):
    _, codex_requests = run_two_turns(tmp_path, fake_api)
    # Turn 2 resumed turn 1's Codex session: its last request carries turn 1's prompt and tool call.
    last = codex_requests[-1]
    said = texts(last)
    assert said[0] == "Create one.txt containing one." and said[-1].startswith("Now create two.txt")
    assert [b["input"]["file_path"].rsplit("/", 1)[1] for m in last["messages"] for b in m["content"]
            if b["type"] == "tool_use"] == ["one.txt", "two.txt"]


def test_a_lost_session_record_gives_turn_two_a_new_session_with_a_recap(tmp_path, fake_api):
    # As after a crash before Codex announced its thread: no record of turn 1's session is left.
    result, codex_requests = run_two_turns(tmp_path, fake_api,
                                           after_turn_one=lambda home: shutil.rmtree(home / "middle-sessions"))
    assert "a new one is told the earlier work" in result.stdout
    said = texts(codex_requests[-1])
    assert len(said) == 1 and "Create one.txt containing one." in said[0]  # one prompt: the recap
    assert "Now create two.txt" in said[0]


def test_a_codex_login_alone_runs_the_middle_agent_and_the_coding_agent(tmp_path):
    """`[agent] provider = "codex"` with `[coding_agent] kind = "codex"`: one Codex login serves both
    (here one fake Responses API; no Anthropic variable at all). The middle agent's calls are told
    apart by its instructions; its decisions come back shaped by the schema it sent."""
    from orchestrator.coding_agent.codex_offline import OFFLINE_KEY_VAR
    from orchestrator.fake_api.scripted import ScriptedResponder

    require_cli("codex", INSTALL)
    repo = fresh_project(tmp_path, {"t1.md": TICKET})
    script = ScriptedResponder()
    script.agent(plan("Create one.txt containing one."), decide(True, "Created one.txt."))
    script.coding_agent(write_file("one.txt", "one\n"), done("Created one.txt."))
    with CodexAgent.offline(script, tmp_path / "codex") as offline:
        provider = offline.options["provider"]
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\n'
            f'[agent]\nprovider = "codex"\nmodel = "gpt-5.5"\nmax_turns = 3\nbase_url = "{provider["base_url"]}"\n'
            f'api_key_env = "{OFFLINE_KEY_VAR}"\n'
            '[coding_agent]\nkind = "codex"\n' + toml_table("coding_agent.options", {**offline.options,
                                                                                   "turn_timeout_s": 120}))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env={**clean, **offline.env}, text=True,
                                capture_output=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "complete ticket t1: 1 turn(s)" in " ".join(output.split()), output
    assert out(repo, "show", "middle/t1:one.txt") == "one"
    assert script.pending("agent") == 0 and script.pending("coding_agent") == 0


def test_max_cost_usd_stops_a_ticket_on_codex(tmp_path, fake_api):
    """Codex reports tokens and no money; its turns are priced (coding_agent/pricing.py), so the
    spending limit holds on it as on Claude Code: after turn 1 the ticket stops, its work kept."""
    require_cli("codex", INSTALL)
    repo = fresh_project(tmp_path, {"t1.md": TICKET})
    script = fake_api.script
    script.agent(plan("Create one.txt containing one."),
                 decide(False, "one.txt is there; two.txt is missing.", "Now create two.txt containing two."))
    script.coding_agent(write_file("one.txt", "one\n"), done("Created one.txt."))
    with CodexAgent.offline(script, tmp_path / "codex") as offline:
        options = {**offline.options, "turn_timeout_s": 120, "price": {"input": 2.0, "output": 8.0}}
        output, _ = _run_with_a_tiny_cost_limit(tmp_path, fake_api, offline, options, "")
    assert "Traceback" not in output and "cost limit reached" in output, output
    assert "failed ticket t1: 1 turn(s)" in output and "turn 2" not in output, output
    assert script.pending("coding_agent") == 0
    assert out(repo, "show", "middle/t1:one.txt") == "one"  # the turn's work is kept on its branch


def _run_with_a_tiny_cost_limit(tmp_path, fake_api, offline, options, more_toml: str) -> tuple[str, dict[str, str]]:
    """`middle run` on Codex with max_cost_usd $0.000001 (passed after one turn): its output on one
    line, and the environment it ran in."""
    (tmp_path / "middle.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 4\nmax_cost_usd = 0.000001\n'
        + more_toml + '[coding_agent]\nkind = "codex"\n' + toml_table("coding_agent.options", options))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"), **offline.env}
    result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    return " ".join((result.stdout + result.stderr).split()), env


def test_max_cost_usd_starts_no_check_correction_on_codex(tmp_path, fake_api):
    """A failed check's correction is another turn: past max_cost_usd none starts (it used to run
    one more turn, spending past the limit, before the limit was looked at). With the limit raised,
    `middle resume` corrects it (the stop is not kept in the checkpoint)."""
    require_cli("codex", INSTALL)
    # the check is the ticket's goal (it fails on the base): a ticket leaving it failing is corrected
    repo = fresh_project(tmp_path, {"t1.md": TICKET.replace("id: t1\n", "id: t1\ncheck_must_pass: true\n")})
    script = fake_api.script
    script.agent(plan("Create one.txt containing one."), decide(True, "Created one.txt."))
    script.coding_agent(write_file("one.txt", "one\n"), done("Created one.txt."))
    with CodexAgent.offline(script, tmp_path / "codex") as offline:
        options = {**offline.options, "turn_timeout_s": 120, "price": {"input": 2.0, "output": 8.0}}
        output, env = _run_with_a_tiny_cost_limit(tmp_path, fake_api, offline, options,
                                                  '[check]\ncommands = ["test -f two.txt"]\n')
        assert "Traceback" not in output and "cost limit reached: $" in output, output
        assert "of max_cost_usd $1e-06" in output, output  # the limit as set, not rounded to $0.00
        assert "no correction was started (`test -f two.txt` failed" in output, output
        assert "failed ticket t1: 1 turn(s)" in output and "turn 2" not in output, output
        assert script.pending("agent") == 0 and script.pending("coding_agent") == 0
        assert out(repo, "show", "middle/t1:one.txt") == "one"  # the turn's work is kept on its branch

        config = (tmp_path / "middle.toml").read_text()
        (tmp_path / "middle.toml").write_text(config.replace("max_cost_usd = 0.000001", "max_cost_usd = 100"))
        script.agent(decide(True, "one.txt is there."), plan("Create two.txt containing two."),
                     decide(True, "Created two.txt."))
        script.coding_agent(write_file("two.txt", "two\n"), done("Created two.txt."))
        result = subprocess.run([MIDDLE, "resume", "t1"], cwd=tmp_path, env=env, text=True,
                                capture_output=True, timeout=300)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0 and "complete ticket t1: 2 turn(s)" in output, output
    assert out(repo, "show", "middle/t1:two.txt") == "two"
