"""A ticket runs to `complete` with the middle agent on each `[agent] provider`, built from the
config as `middle run` builds it, and the real Claude Code as the coding agent on the fake."""

from __future__ import annotations

import pytest
from e2e_helpers import decide, done, fresh_project, plan, worktree, write_file

from orchestrator.config.settings import Config
from orchestrator.fake_api import claude_code_env
from orchestrator.fake_api.cloud import bedrock_env, google_service_account_file, vertex_env
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from orchestrator.running.orchestrator import Orchestrator

pytestmark = [pytest.mark.cli, pytest.mark.slow]

TICKET = {"t1.md": "---\ntitle: Add a notes file\nproject: calc\nid: t1\n---\nCreate notes.txt saying hello.\n"}


def run_ticket(tmp_path, claude_env, agent: dict, script_agent, coding_options: dict | None = None):
    """Run t1 with `[agent]` = agent; `script_agent(*replies)` scripts the middle agent's model."""
    fresh_project(tmp_path, TICKET)
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), project={"path": "repo", "tickets_dir": "tickets"},
                 agent={"max_turns": 3, **agent},
                 coding_agent={"options": {"allowed_tools": ["Read", "Write", "Edit"], "turn_timeout_s": 120,
                                           **(coding_options or {})}})
    script_agent(plan("Create the file notes.txt containing the word hello."), decide(True, "Created notes.txt."))
    with Orchestrator(cfg, coding_agent_env=claude_env) as orch:
        assert orch.sync_tickets().errors == []
        outcome = orch.run_ticket("t1")
    return outcome


def coding_agent_script(fake_api) -> None:
    fake_api.script.coding_agent(write_file("notes.txt", "hello\n"), done("Created notes.txt."))


def assert_complete(outcome, tmp_path) -> None:
    assert outcome.status == "complete", outcome
    assert (worktree(tmp_path, "t1") / "notes.txt").read_text() == "hello\n"


def setenv(monkeypatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_a_ticket_completes_on_bedrock(tmp_path, fake_api, claude_env, claude_cli, monkeypatch):
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    setenv(monkeypatch, bedrock_env())
    coding_agent_script(fake_api)
    outcome = run_ticket(tmp_path, claude_env, {"provider": "bedrock", "model": "us.anthropic.claude-sonnet-5-5",
                                                   "base_url": fake_api.base_url}, fake_api.script.agent)
    assert_complete(outcome, tmp_path)
    agent = fake_api.requests_for("agent")
    assert [r.path for r in agent] == ["/model/us.anthropic.claude-sonnet-5-5/invoke"] * 2
    # Claude Code followed the middle agent to Bedrock (one config line for a Bedrock-only team):
    # its turns streamed through invoke-with-response-stream, SigV4-signed, none on the Messages API
    coding = fake_api.requests_for("coding_agent")
    assert coding and all(r.cloud == "bedrock" and r.path.endswith("/invoke-with-response-stream")
                          and r.headers["authorization"].startswith("AWS4-HMAC-SHA256") for r in coding)


def test_claude_code_stays_on_its_own_login_with_follow_provider_off(tmp_path, fake_api, claude_env, claude_cli,
                                                                      monkeypatch):
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    setenv(monkeypatch, bedrock_env())
    coding_agent_script(fake_api)
    outcome = run_ticket(tmp_path, claude_env, {"provider": "bedrock", "model": "us.anthropic.claude-sonnet-5-5",
                                                   "base_url": fake_api.base_url}, fake_api.script.agent,
                         coding_options={"follow_provider": False})
    assert_complete(outcome, tmp_path)
    assert all(r.cloud is None for r in fake_api.requests_for("coding_agent"))  # the Messages API


def test_a_ticket_completes_on_vertex(tmp_path, fake_api, claude_env, claude_cli, monkeypatch):
    key = google_service_account_file(tmp_path / "sa.json", f"{fake_api.base_url}/token", "team-project")
    monkeypatch.delenv("ANTHROPIC_VERTEX_PROJECT_ID", raising=False)
    setenv(monkeypatch, vertex_env(key))
    coding_agent_script(fake_api)
    # Claude Code follows to Vertex. Its Google sign-in cannot be pointed at the fake's token
    # endpoint (its google-auth library always asks oauth2.googleapis.com), so here it skips that
    # sign-in and sends a bearer token, as behind a gateway; the middle agent signs in for real.
    claude_env = {**claude_env, "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1", "ANTHROPIC_AUTH_TOKEN": "ya29.gateway",
                  "ANTHROPIC_VERTEX_PROJECT_ID": "team-project"}
    outcome = run_ticket(tmp_path, claude_env, {"provider": "vertex", "base_url": f"{fake_api.base_url}/v1",
                                                   "region": "us-east5"}, fake_api.script.agent)
    assert_complete(outcome, tmp_path)
    agent = fake_api.requests_for("agent")
    assert len(agent) == 2 and all(r.cloud == "vertex" and "/projects/team-project/" in r.path for r in agent)
    coding = fake_api.requests_for("coding_agent")
    assert coding and all(r.cloud == "vertex" and r.path.endswith(":streamRawPredict")
                          and "/projects/team-project/locations/us-east5/" in r.path for r in coding)


def test_a_ticket_completes_on_an_openai_compatible_server_that_first_answers_prose(
        tmp_path, fake_api, claude_env, claude_cli):
    coding_agent_script(fake_api)
    with FakeChatCompletionsAPI(supports_json_schema=False) as server:
        def script(first, *rest):  # a local model that first wraps nothing in JSON at all
            server.script.agent("I think Claude Code should create the notes file.", first, *rest)

        outcome = run_ticket(tmp_path, claude_env, {"provider": "openai-compatible", "model": "llama3.1",
                                                       "base_url": server.base_url}, script)
        chats = server.requests
    assert_complete(outcome, tmp_path)
    # refused schema, the prose, its retry (the plan), then the decision
    assert [r.reply["status"] for r in chats] == [400, 200, 200, 200]
    assert "not valid JSON" in chats[2].body["messages"][-1]["content"]
    assert fake_api.requests_for("agent") == []  # the middle agent never used the Messages API


def test_a_ticket_completes_with_the_middle_agent_through_claude_code(
        tmp_path, fake_api, claude_env, claude_cli, monkeypatch):
    # The middle agent's CLI reads the process environment (a user's own login); here: the fake.
    setenv(monkeypatch, claude_code_env(fake_api.base_url, tmp_path / "cc-agent", max_retries=0))
    coding_agent_script(fake_api)
    outcome = run_ticket(tmp_path, claude_env, {"provider": "claude-code", "cli_path": claude_cli},
                            fake_api.script.agent)
    assert_complete(outcome, tmp_path)
    agent = fake_api.requests_for("agent")
    assert len(agent) == 2 and all(r.headers.get("x-app") == "cli" for r in agent)
    assert all({t["name"] for t in r.body["tools"]} <= {"StructuredOutput", "DeferredToolPlaceholder"} for r in agent)
