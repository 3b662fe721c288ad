"""Each coding agent's messages name the options table its options come from, made so where the
message is made: `[coding_agent.options]` for the configured kind, `[coding_agents.<kind>]` for a
kind a ticket picks. Before, the agents always said `[coding_agent.options]` and services (and the
graph's turn failure) rewrote the text afterwards."""

from __future__ import annotations

import pytest

from orchestrator.config.settings import Config
from orchestrator.errors import CodingAgentMissing
from orchestrator.services import Services


def services(tmp_path, kind: str, tables: dict[str, dict[str, object]], env: dict[str, str] | None = None) -> Services:
    return Services(Config(root=tmp_path, state_dir=str(tmp_path / "state"), coding_agent={"kind": kind},
                           coding_agents=tables), coding_agent_env=env or {})


def test_claude_code_picked_by_a_ticket_names_its_own_table_in_a_failed_turn(tmp_path, fake_cli):
    with services(tmp_path, "codex", {"claude-code": {"cli_path": fake_cli}},
                  {"FAKE_CLAUDE_MODE": "crash"}) as svc:
        agent = svc.coding_agent_for("claude-code")
        assert getattr(agent, "table", None) == "[coding_agents.claude-code]"
        turn = agent.run_turn("hi", tmp_path, session_id=None, resume=False)
    assert turn.is_error and "Check the `[coding_agents.claude-code]` settings such as extra_args" in (turn.error or "")
    assert "[coding_agent.options]" not in (turn.error or "")


def test_claude_code_as_the_configured_kind_names_coding_agent_options(tmp_path, fake_cli):
    with services(tmp_path, "claude-code", {"claude-code": {"cli_path": fake_cli}},
                  {"FAKE_CLAUDE_MODE": "crash"}) as svc:
        turn = svc.coding_agent_for(None).run_turn("hi", tmp_path, session_id=None, resume=False)
    assert "Check the `[coding_agent.options]` settings" in (turn.error or ""), turn.error


@pytest.mark.parametrize("configured, table", [("claude-code", "[coding_agents.codex]"),
                                               ("codex", "[coding_agent.options]")])
def test_codex_not_found_names_the_table_its_cli_path_is_set_in(tmp_path, configured, table):
    with services(tmp_path, configured, {"codex": {"cli_path": str(tmp_path / "no-codex")}}) as svc:
        with pytest.raises(CodingAgentMissing) as missing:
            svc.coding_agent_for("codex")
    said = str(missing.value)
    assert f"set `{table} cli_path`" in said and "npm install -g @openai/codex@" in said, said
    other = "[coding_agent.options]" if table != "[coding_agent.options]" else "[coding_agents.codex]"
    assert other not in said
