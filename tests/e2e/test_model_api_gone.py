"""What `middle run` does when the coding agent's model API goes away mid-turn (the real OpenCode
CLI on the fake Chat Completions API, stopped during its second call): the turn ends seconds later,
not at turn_timeout_s, and the batch stops with one `error:` line saying nothing answered at the
model API's address; what the turn wrote is kept, the ticket failed and resumable (not back to
pending, where `middle run` would refuse to drop the work and `middle resume` find nothing to
resume), and once the server is back `middle resume` completes it with that work committed. (The Gemini CLI's case,
and the agent-level details: test_<agent>_agent.py's
test_a_model_api_that_goes_away_mid_turn_ends_the_turn_at_once_as_unreachable.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import decide, fresh_project, plan
from test_codex_e2e import toml_table

from orchestrator.coding_agent.aider import AiderAgent
from orchestrator.coding_agent.aider_launch import INSTALL_HINT as AIDER_INSTALL
from orchestrator.coding_agent.codex import INSTALL as CODEX_INSTALL
from orchestrator.coding_agent.codex import CodexAgent
from orchestrator.coding_agent.opencode import INSTALL
from orchestrator.coding_agent.opencode_offline import MODEL, PROVIDER, offline_home
from orchestrator.config.offline import FAKE_API_KEY
from orchestrator.fake_api import ScriptedResponder, claude_code_env, reply
from orchestrator.fake_api.aider_chat import FakeAiderAPI
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from orchestrator.fake_api.openai_responses import FakeResponsesAPI
from orchestrator.testing.clis import require_cli
from orchestrator.testing.gone import WIP, going_away
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
TICKET = "---\ntitle: One file\nproject: calc\nid: t1\n---\nCreate wip.txt.\n"


def test_opencode_on_a_model_api_gone_mid_turn_stops_the_batch_with_one_error_line(tmp_path, fake_api):
    require_cli("opencode", INSTALL)
    fresh_project(tmp_path, {"t1.md": TICKET})
    fake_api.script.agent(plan("Create wip.txt containing wip."))
    chat = going_away(FakeChatCompletionsAPI, script=fake_api.script)
    try:
        # (turn_timeout_s 120: a turn left to OpenCode's retries would time out, said otherwise)
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 4\n'
            '[coding_agent]\nkind = "opencode"\n'
            + toml_table("coding_agent.options", {"model": f"{PROVIDER}/{MODEL}", "turn_timeout_s": 120}))
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_", "OPENCODE_"))}
        env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"),
               **offline_home(tmp_path / "opencode-home", chat.base_url, FAKE_API_KEY)}
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    finally:
        chat.stop()
    output = result.stdout + result.stderr
    said = " ".join(output.split())
    assert result.returncode != 0 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert "OpenCode could not reach the model API (Cannot connect to API)" in said, output
    assert "Nothing answered at the model API's address" in said, output
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        # no turn finished, but the failed one wrote: failed and resumable, not back to pending
        # (policy.py, BatchStopper), where `middle run` would refuse to delete the work and
        # `middle resume` would find nothing to resume
        assert store.get_ticket("t1").status.value == "failed"
    assert (tmp_path / "state" / "worktrees" / "t1" / "wip.txt").read_text() == WIP, output
    # The server back: a new run refuses to drop the work and names resume, which continues it.
    chat = FakeChatCompletionsAPI(fake_api.script).start()
    try:
        env = {**env, **offline_home(tmp_path / "opencode-home", chat.base_url, FAKE_API_KEY)}
        again = subprocess.run([MIDDLE, "run", "t1"], cwd=tmp_path, env=env, text=True, capture_output=True,
                               timeout=120)
        assert again.returncode != 0 and "`middle resume t1`" in " ".join(again.stderr.split()), again.stderr
        fake_api.script.agent(decide(True, "wip.txt is there"))
        fake_api.script.coding_agent(reply("Done: wip.txt holds wip."))
        resumed = subprocess.run([MIDDLE, "resume", "t1"], cwd=tmp_path, env=env, text=True, capture_output=True,
                                 timeout=120)
    finally:
        chat.stop()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        assert store.get_ticket("t1").status.value == "complete"
    shown = subprocess.run(["git", "show", "--stat", "middle/t1"], cwd=tmp_path / "repo", text=True,
                           capture_output=True)
    assert "wip.txt" in shown.stdout, shown.stdout  # the failed turn's work, committed


# kind -> (its CLI's install line, its fake, what the first call writes, replies before it goes away)
OTHERS = {
    "codex": (CODEX_INSTALL, FakeResponsesAPI, ("wip.txt", WIP), (), "Codex could not get an answer from the model"),
    # (aider's second call of the turn: its fix of the lint error its first edit made)
    "aider": (AIDER_INSTALL, FakeAiderAPI, ("wip.py", "def half(:\n"), ("Wrote wip.py.",),
              "aider could not reach the model API (InternalServerError: OpenAIException - Connection error.)"),
}


@pytest.mark.parametrize("kind", sorted(OTHERS))
def test_codex_and_aider_on_a_model_api_gone_mid_turn_leave_the_ticket_failed_with_its_work(tmp_path, fake_api, kind):
    """As OpenCode above, through `middle run` with the real CLI at its users' retry settings
    (Codex's own retries, aider's retry_timeout_s of 60 s): one `error:` line saying nothing
    answered, the ticket failed and resumable, the turn's write kept in its worktree."""
    install, fake, (name, content), then, words = OTHERS[kind]
    require_cli(kind, install)
    fresh_project(tmp_path, {"t1.md": TICKET})
    worktree = (tmp_path / "state" / "worktrees" / "t1").resolve()
    fake_api.script.agent(plan(f"Create {name}."))
    gone = going_away(fake, name=name, content=content, then=then, script=fake_api.script,
                      directory=lambda body: str(worktree))
    agent_class = CodexAgent if kind == "codex" else AiderAgent
    try:
        with agent_class.offline(ScriptedResponder(), tmp_path / f"{kind}-offline") as off:
            if kind == "codex":  # (its own retries: the provider's defaults)
                options = {**off.options, "provider": {"base_url": gone.base_url,
                                                       "env_key": off.options["provider"]["env_key"]}}
            else:
                options = {**off.options, "openai_api_base": gone.base_url, "retry_timeout_s": 60}
            (tmp_path / "middle.toml").write_text(
                'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 4\n'
                f'[coding_agent]\nkind = "{kind}"\n'
                + toml_table("coding_agent.options", {**options, "turn_timeout_s": 300}))
            clean = {k: v for k, v in os.environ.items()
                     if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_", "OPENAI_"))}
            env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"), **off.env}
            result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True,
                                    timeout=600)
    finally:
        gone.stop()
    output = result.stdout + result.stderr
    said = " ".join(output.split())
    assert result.returncode != 0 and "Traceback" not in output, output
    assert len([line for line in output.splitlines() if line.startswith("error:")]) == 1, output
    assert words in said and "Nothing answered at the model API's address" in said, output
    assert "did not finish the turn within" not in said, output  # (not turn_timeout_s)
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        assert store.get_ticket("t1").status.value == "failed"  # resumable, not back to pending
    assert (worktree / name).read_text() == content, output
