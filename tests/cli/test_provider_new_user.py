"""A new user's first try at each provider: `middle init` in a fresh repository, `[agent]` set with
a mistake on purpose, then `middle doctor` and `middle run`: each says one `error:` line naming
what to set, exits non-zero, and shows no traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.fake_api import claude_code_env
from orchestrator.fake_api.cloud import bedrock_env, google_service_account_file, vertex_env
from orchestrator.fake_api.openai_chat import FakeChatCompletionsAPI
from orchestrator.fake_api.server import FakeMessagesAPI
from orchestrator.testing import make_repo

pytestmark = pytest.mark.cli

Env = Callable[[pytest.MonkeyPatch, Path], None]


def no_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in bedrock_env().items():
        monkeypatch.setenv(key, value)
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)


def vertex_without_project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key = google_service_account_file(tmp_path / "sa.json", "http://127.0.0.1:9/token", project_id="")
    for name, value in vertex_env(key).items():
        monkeypatch.setenv(name, value)
    for var in ("ANTHROPIC_VERTEX_PROJECT_ID", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)


def vertex_without_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    vertex_without_project(monkeypatch, tmp_path)
    monkeypatch.delenv("CLOUD_ML_REGION")


def only_git_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PATH with git alone: no codex on it (Claude Code, the coding agent, is the bundled copy)."""
    (tmp_path / "bin").mkdir()
    git = next(Path(d) / "git" for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / "git").is_file())
    (tmp_path / "bin" / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))


def nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pass


CASES: list[tuple[str, str, Env, str]] = [
    ("unknown-provider", 'provider = "azure"', nothing, "Input should be 'anthropic'"),
    ("bedrock-no-region", 'provider = "bedrock"\nmodel = "us.anthropic.claude-sonnet-5-5"', no_region,
     "Amazon Bedrock needs a region: set [agent] region"),
    ("vertex-no-project", 'provider = "vertex"\nregion = "us-east5"', vertex_without_project,
     "Google Vertex AI needs a project: set [agent] project_id"),
    ("vertex-no-region", 'provider = "vertex"', vertex_without_region,
     "Google Vertex AI needs a region: set [agent] region"),
    ("openai-no-base-url", 'provider = "openai-compatible"\nmodel = "llama3.1"', nothing,
     'provider "openai-compatible" needs base_url'),
    ("claude-code-absent", 'provider = "claude-code"\ncli_path = "/nonexistent/claude"', nothing,
     "provider claude-code: "),
    ("codex-absent", 'provider = "codex"', only_git_on_path,
     "provider codex: the Codex CLI (codex) was not found: install it with `npm install -g @openai/codex@"),
]


def started_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_lines: str) -> None:
    """`middle init` in a fresh repository, then [agent] given `agent_lines` (as a user edits it)."""
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    project = tmp_path / "project"
    make_repo(project)
    monkeypatch.chdir(project)
    result = CliRunner().invoke(main, ["init"])
    assert result.exit_code == 0, result.output
    config = project / "middle.toml"
    text = config.read_text()
    if "model =" in agent_lines:  # the user's model instead of the starter's
        text = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("model ="))
    config.write_text(text.replace("[agent]\n", f"[agent]\n{agent_lines}\n", 1))


def assert_one_error_line(result, needle: str) -> None:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output and (result.exception is None or isinstance(result.exception, SystemExit))
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert needle in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("agent_lines, env, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", [["doctor"], ["run"]], ids=["doctor", "run"])
def test_a_provider_set_wrong_is_one_error_line_from_doctor_and_run(tmp_path, monkeypatch, claude_cli, command,
                                                                    agent_lines, env, needle):
    env(monkeypatch, tmp_path)
    started_project(tmp_path, monkeypatch, agent_lines)
    assert_one_error_line(CliRunner().invoke(main, command), needle)


@pytest.mark.parametrize("command", [["doctor"], ["run"]], ids=["doctor", "run"])
def test_an_openai_compatible_url_without_v1_says_to_add_it(tmp_path, monkeypatch, claude_cli, command):
    with FakeChatCompletionsAPI(v1_only=True) as server:
        bare = server.base_url.removesuffix("/v1")
        started_project(tmp_path, monkeypatch, f'provider = "openai-compatible"\nmodel = "llama3.1"\n'
                                               f'base_url = "{bare}"')
        result = CliRunner().invoke(main, command)
    assert_one_error_line(result, f'set [agent] base_url = "{bare}/v1"')


@pytest.mark.parametrize("command", [["doctor"], ["run"]], ids=["doctor", "run"])
def test_claude_code_not_logged_in_says_to_sign_in(tmp_path, monkeypatch, claude_cli, command):
    with FakeMessagesAPI() as api:
        for key, value in claude_code_env(api.base_url, tmp_path / "cc", api_key="", max_retries=0).items():
            monkeypatch.setenv(key, value)
        started_project(tmp_path, monkeypatch, f'provider = "claude-code"\ncli_path = "{claude_cli}"')
        result = CliRunner().invoke(main, command)
    assert_one_error_line(result, "provider claude-code: Claude Code cannot use a model")
    assert "/login" in result.output
