"""What `middle run` does when the coding agent's model API goes away mid-turn (the real OpenCode
CLI on the fake Chat Completions API, stopped during its second call): the turn ends seconds later,
not at turn_timeout_s, and the batch stops with one `error:` line saying nothing answered at the
model API's address; what the turn wrote stays in the ticket's worktree. (The Gemini CLI's case,
and the agent-level details: test_<agent>_agent.py's
test_a_model_api_that_goes_away_mid_turn_ends_the_turn_at_once_as_unreachable.)"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import fresh_project, plan
from test_codex_e2e import toml_table

from orchestrator.coding_agent.opencode import INSTALL
from orchestrator.coding_agent.opencode_offline import MODEL, PROVIDER, offline_home
from orchestrator.config.offline import FAKE_API_KEY
from orchestrator.fake_api import claude_code_env, reply, tool_use, working_directory
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from orchestrator.testing.clis import require_cli
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
TICKET = "---\ntitle: One file\nproject: calc\nid: t1\n---\nCreate wip.txt.\n"


def test_opencode_on_a_model_api_gone_mid_turn_stops_the_batch_with_one_error_line(tmp_path, fake_api):
    require_cli("opencode", INSTALL)
    fresh_project(tmp_path, {"t1.md": TICKET})
    chat = FakeChatCompletionsAPI(fake_api.script).start()

    def goes_away(body: dict[str, Any]) -> Any:
        stopping = threading.Thread(target=chat.stop)  # (not the handler's own thread: stop() joins)
        stopping.start()
        stopping.join()
        return reply(tool_use("Write", {"file_path": f"{working_directory(body)}/never.txt", "content": "x\n"}))

    fake_api.script.agent(plan("Create wip.txt containing wip."))
    fake_api.script.coding_agent(
        lambda body: reply(tool_use("Write", {"file_path": f"{working_directory(body)}/wip.txt", "content": "wip\n"})),
        goes_away)
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
        assert store.get_ticket("t1").status.value == "pending"  # no turn finished (policy.py, BatchStopper)
    # What the turn wrote is kept: its worktree is not removed as unused (driver._drop_untouched)
    assert (tmp_path / "state" / "worktrees" / "t1" / "wip.txt").read_text() == "wip\n", output
