"""`middle run` with a provider whose credentials cannot be used: one `error:` line naming the
provider and what to set, the batch stopped, every ticket still pending."""

from __future__ import annotations

from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.fake_api.cloud import bedrock_env
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from tickets.store import TicketStore


def backlog(project_dir, agent: str) -> None:
    (project_dir / "middle.toml").write_text(f'[project]\npath = "repo"\n[agent]\n{agent}\n')
    for name in ("a", "b", "c"):
        (project_dir / "tickets" / f"{name}.md").write_text(f"---\ntitle: Ticket {name}\nproject: demo\n---\nDo it.\n")


def assert_one_error(result, needle: str, project_dir) -> None:
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], result.output
    with TicketStore(project_dir / ".middle" / "middle.sqlite3") as store:
        assert [store.get_ticket(t).status.value for t in "abc"] == ["pending"] * 3


def test_a_rejected_openai_compatible_key_stops_the_batch_with_one_line(project_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    with FakeChatCompletionsAPI() as server:
        server.rejected_credentials.add("sk-wrong")
        backlog(project_dir, f'provider = "openai-compatible"\nmodel = "gpt-5-mini"\nbase_url = "{server.base_url}"')
        result = CliRunner().invoke(main, ["run", "--parallel", "2"])
    assert_one_error(result, "provider openai-compatible: the server at", project_dir)
    assert "rejected the API key (401): set OPENAI_API_KEY" in result.output


def test_bedrock_without_aws_credentials_stops_the_batch_with_one_line(project_dir, monkeypatch):
    env = bedrock_env()
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN",
                "AWS_BEARER_TOKEN_BEDROCK"):
        env.pop(key, None)
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    backlog(project_dir, 'provider = "bedrock"')
    result = CliRunner().invoke(main, ["run"])
    assert_one_error(result, "Amazon Bedrock: no AWS credentials found: set AWS_ACCESS_KEY_ID", project_dir)


def test_a_provider_whose_sdk_is_not_installed_is_one_line_with_the_pip_command(project_dir, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # as if the `openai` extra were not installed
    backlog(project_dir, 'provider = "openai-compatible"\nmodel = "llama3.1"\nbase_url = "http://127.0.0.1:9/v1"')
    result = CliRunner().invoke(main, ["run"])
    assert_one_error(result, "needs the openai package: pip install 'middle-agent[openai]'", project_dir)
