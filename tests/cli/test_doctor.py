"""`middle doctor`: one table of the coding agent and the model, each checked on a local fake."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.fake_api import FakeMessagesAPI, ScriptedResponder, claude_code_env
from orchestrator.fake_api.cloud import FAKE_AWS_ACCESS_KEY, bedrock_env
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI


@pytest.fixture
def fake():
    with FakeMessagesAPI(ScriptedResponder()) as api:
        yield api


def doctor(project_dir, agent: str = "", coding_agent: str = "", *args: str):
    (project_dir / "middle.toml").write_text(f'[project]\npath = "repo"\n[agent]\n{agent}\n'
                                             f'[coding_agent.options]\n{coding_agent}\n')
    return CliRunner().invoke(main, ["doctor", *args])


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


@pytest.mark.cli
def test_a_reachable_model_and_the_bundled_cli_are_ready(project_dir, fake, claude_cli, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    result = doctor(project_dir, f'base_url = "{fake.base_url}"', f'cli_path = "{claude_cli}"')
    assert result.exit_code == 0, result.output
    assert "claude-code" in result.output and "(Claude Code)" in result.output  # the CLI's version
    assert "anthropic: claude-sonnet-5-5" in result.output and "answered" in result.output
    [call] = fake.requests  # one tiny call
    assert call.body["max_tokens"] == 16 and "sk-test" in call.headers.get("authorization", "")
    assert "ready" in result.output and not error_lines(result.output)


@pytest.mark.cli
def test_offline_looks_for_credentials_without_calling(project_dir, fake, claude_cli, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    result = doctor(project_dir, f'base_url = "{fake.base_url}"', "", "--offline")
    assert result.exit_code == 0, result.output
    assert "not called: --offline" in result.output and fake.requests == []


def test_each_problem_is_one_line_saying_what_to_do(project_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = doctor(project_dir, "", f'cli_path = "{tmp_path / "no-claude"}"')
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = error_lines(result.output)
    assert len(lines) == 2, result.output
    assert lines[0].startswith("error: coding agent (claude-code): Claude Code was not found at the configured")
    assert lines[1].startswith("error: middle agent (anthropic: claude-sonnet-5-5): ANTHROPIC_API_KEY is not set")
    offline = doctor(project_dir, "", f'cli_path = "{tmp_path / "no-claude"}"', "--offline")
    assert offline.exit_code == 1  # the coding agent is needed offline too: still an error
    assert [line[:40] for line in error_lines(offline.output)] == [lines[0][:40]], offline.output


@pytest.mark.cli
def test_offline_without_an_api_key_passes_with_a_warning_that_names_the_fake(project_dir, claude_cli, monkeypatch):
    """Before, it exited 1 with an `error:` line whose own hint was `middle run --fake`: the
    checks --offline makes that need no key passed, so the key is a warning and the exit 0."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = doctor(project_dir, "", f'cli_path = "{claude_cli}"', "--offline")
    assert result.exit_code == 0 and not error_lines(result.output), result.output
    [warning] = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert "ANTHROPIC_API_KEY is not set" in warning and "`middle run --fake`" in warning
    assert "no credentials" in result.output
    assert "ready for `middle run --fake`" in " ".join(result.output.split())
    assert doctor(project_dir, "", f'cli_path = "{claude_cli}"').exit_code == 1  # the call needs the key


@pytest.mark.cli
def test_bedrock_with_a_rejected_key_names_bedrock_and_what_to_set(project_dir, fake, claude_cli, monkeypatch):
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for key, value in bedrock_env().items():
        monkeypatch.setenv(key, value)
    fake.rejected_credentials.add(FAKE_AWS_ACCESS_KEY)
    result = doctor(project_dir, f'provider = "bedrock"\nbase_url = "{fake.base_url}"')
    assert result.exit_code == 1
    [line] = error_lines(result.output)
    assert "Amazon Bedrock rejected the AWS credentials (403): set AWS_ACCESS_KEY_ID" in line
    assert fake.requests[0].path.startswith("/model/")


@pytest.mark.cli
def test_an_openai_compatible_server_answers(project_dir, claude_cli):
    with FakeChatCompletionsAPI() as server:
        result = doctor(project_dir, f'provider = "openai-compatible"\nmodel = "llama3.1"\n'
                                     f'base_url = "{server.base_url}"')
        assert len(server.requests) == 1 and server.requests[0].body["model"] == "llama3.1"
    assert result.exit_code == 0, result.output
    assert "openai-compatible: llama3.1" in result.output and "answered" in result.output


@pytest.mark.cli
def test_the_claude_code_provider_is_checked_with_one_call_through_the_cli(
        project_dir, fake, claude_cli, monkeypatch, tmp_path):
    for key, value in claude_code_env(fake.base_url, tmp_path / "cc", max_retries=0).items():
        monkeypatch.setenv(key, value)
    result = doctor(project_dir, f'provider = "claude-code"\ncli_path = "{claude_cli}"')
    assert result.exit_code == 0, result.output
    assert "claude-code: claude-sonnet-5-5" in result.output and "answered" in result.output
    assert len(fake.requests) == 1 and fake.requests[0].headers.get("x-app") == "cli"


def test_a_plugin_coding_agent_reports_through_its_doctor_method(tmp_path):
    from pydantic import BaseModel

    from orchestrator.config.settings import Config
    from orchestrator.doctor import coding_agent_check
    from orchestrator.plugin_api import hookimpl
    from orchestrator.plugins.manager import PluginRegistry

    class ToyOptions(BaseModel):
        binary: str = "toy-agent"

    class ToyAgent:
        kind = "toy"
        Options = ToyOptions

        def run_turn(self, prompt, cwd, *, session_id, resume, on_event=None):
            raise AssertionError("doctor runs no turn")

        @classmethod
        def doctor(cls, options):
            return options.binary, f"{options.binary} is not installed: pip install toy-agent"

    class Plugin:
        @hookimpl
        def register_coding_agents(self, register):
            register(ToyAgent)

    reg = PluginRegistry(load_entry_points=False, extra_plugins=(Plugin(),))
    check = coding_agent_check(Config(root=tmp_path, coding_agent={"kind": "toy"}), reg)
    assert (check.uses, check.where, check.ok) == ("toy", "toy-agent", False), check.problem
    assert check.problem == "toy-agent is not installed: pip install toy-agent"
    assert not coding_agent_check(Config(root=tmp_path, coding_agent={"kind": "nope"}), reg).ok


def test_each_agent_a_ticket_names_gets_its_own_row_and_an_agent_following_the_provider_says_so(
        project_dir, monkeypatch, tmp_path):
    """A run uses the configured agent and every kind a ticket names: each is checked (its CLI, or
    the install command); aider following `[agent] provider = "openai-compatible"` says so."""
    (project_dir / "tickets" / "t1.md").write_text("---\ntitle: A\nproject: repo\ncoding_agent: aider\n---\nx\n")
    (project_dir / "tickets" / "t2.md").write_text("---\ntitle: B\nproject: repo\ncoding_agent: codex\n---\nx\n")
    (project_dir / "middle.toml").write_text(
        '[project]\npath = "repo"\n[agent]\nprovider = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\n'
        f'model = "llama"\n[coding_agents.codex]\ncli_path = "{tmp_path / "no-codex"}"\n')
    result = CliRunner().invoke(main, ["doctor", "--offline"])
    assert result.exit_code != 0  # codex is not where its cli_path says
    out = " ".join(result.output.split())
    assert "claude-code" in out and "aider (following [agent] provider openai-compatible)" in out
    [problem] = [line for line in error_lines(result.output) if "codex" in line.lower()]
    assert "npm install -g @openai/codex@" in problem
    # Codex reports tokens, not money: the row says what its turns count at for max_cost_usd.
    assert "codex (turns priced at the highest listed price (the CLI chooses the model))" in out
    # aider follows the provider to a server on 127.0.0.1: priced as unknown, told how to count it at 0.
    assert "aider (following [agent] provider openai-compatible) (turns at aider's own cost; a model it has no " \
           "price for at the highest listed price" in out, out
    assert "served at a local address (http://127.0.0.1:9/v1): if it costs nothing, set price = {input = 0, " \
           "output = 0})" in out, out


def test_run_says_once_at_its_start_how_to_count_a_local_model_free(project_dir, monkeypatch):
    """A model at a local address is priced as unknown (it may be a gateway to a paid API), so
    max_cost_usd may stop a free one early: `middle run` says once how to count it at 0, and a
    `price` of the user's silences it. (The server listens: one that does not is an error before
    any ticket, test_doctor_says_nothing_answers_at_a_coding_agent_s_base_url.)"""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    config = ('[project]\npath = "repo"\n[agent]\nprovider = "openai-compatible"\n'
              f'base_url = "{url}"\nmodel = "llama"\n[coding_agent]\nkind = "aider"\n')
    (project_dir / "middle.toml").write_text(config)
    for name in [p.name for p in (project_dir / "tickets").iterdir()]:
        (project_dir / "tickets" / name).unlink()  # nothing to run: only the start is looked at
    with server:
        out = " ".join(CliRunner().invoke(main, ["run"]).output.split())
        assert out.count(f"served at a local address ({url}): if it costs nothing, set price = "
                         "{input = 0, output = 0}") == 1, out
        assert "aider: turns at aider's own cost" in out, out
        (project_dir / "middle.toml").write_text(config + '[coding_agent.options]\nprice = {input = 1, output = 1}\n')
        out = " ".join(CliRunner().invoke(main, ["run"]).output.split())
        assert "local address" not in out and "no pending tickets" in out, out


def test_doctor_leaves_nothing_in_the_gemini_cli_s_home(project_dir, tmp_path, monkeypatch):
    """`gemini --version` registers the directory in ~/.gemini/projects.json and leaves two empty
    projects.json.*.tmp files there on every call: doctor's probe of it writes nothing there."""
    from orchestrator.coding_agent.gemini import INSTALL_COMMAND
    from orchestrator.testing.clis import require_cli

    require_cli("gemini", INSTALL_COMMAND)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    (project_dir / "tickets" / "t1.md").write_text("---\ntitle: A\nproject: repo\ncoding_agent: gemini\n---\nx\n")
    (project_dir / "middle.toml").write_text('[project]\npath = "repo"\n')
    result = CliRunner().invoke(main, ["doctor", "--offline"])
    assert "gemini" in result.output and "Traceback" not in result.output, result.output
    assert not (home / ".gemini").exists(), sorted(p.name for p in (home / ".gemini").iterdir())


def test_doctor_says_a_local_server_named_by_host_name_is_local(project_dir):
    """`http://ollama.lan:11434/v1` (a home network's name) is a local server as 127.0.0.1 is:
    doctor's row says how to count its model at 0. (A name resolved to private addresses says what
    it resolved to: tests/coding_agent/test_local_pricing.py.)"""
    (project_dir / "tickets" / "t1.md").write_text("---\ntitle: A\nproject: repo\ncoding_agent: codex\n---\nx\n")
    (project_dir / "middle.toml").write_text(
        '[project]\npath = "repo"\n[coding_agents.codex]\nmodel = "qwen3-coder"\n'
        'provider = {base_url = "http://ollama.lan:11434/v1", env_key = "K"}\n')
    out = " ".join(CliRunner().invoke(main, ["doctor", "--offline"]).output.split())
    assert "served at a local address (http://ollama.lan:11434/v1): if it costs nothing, set price = " \
           "{input = 0, output = 0}" in out, out


def test_doctor_says_nothing_answers_at_a_coding_agent_s_base_url(project_dir):
    """A base URL the user gave a coding agent with nothing listening behind it (a local model
    server not started) is a problem of its row, as `middle run` says it before any ticket; with
    --offline (a `--fake` run, which never calls it) it is not asked."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    (project_dir / "middle.toml").write_text(
        f'[project]\npath = "repo"\n[coding_agent]\nkind = "codex"\n[coding_agent.options]\n'
        f'provider = {{base_url = "http://127.0.0.1:{port}/v1", env_key = "K"}}\n')
    out = " ".join(CliRunner().invoke(main, ["doctor"]).output.split())
    assert "model API unreachable" in out, out
    assert f"nothing answers at http://127.0.0.1:{port}/v1 (connection refused at 127.0.0.1 port {port}): " \
           "start that server, or correct the base URL" in out, out
    offline = " ".join(CliRunner().invoke(main, ["doctor", "--offline"]).output.split())
    assert "unreachable" not in offline and "nothing answers" not in offline, offline
