"""One owner (orchestrator/following.py) for a coding agent's settings with `[agent] provider`
followed: `middle doctor` (its rows, the local-model note) and `middle run` (the agent it builds)
follow the provider to the same base URL with the same environment; and the base URL is asked
lazily, before the first turn of a run, not whenever the agent is built."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.config.settings import Config
from orchestrator.doctor import _followed, local_note_once
from orchestrator.services import Services

pytestmark = pytest.mark.cli


@pytest.fixture
def listening():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    return f"http://127.0.0.1:{port}/v1"


def config(root: Path, **fields) -> Config:
    return Config(root=root, state_dir=str(root / "state"), project={"path": "repo"}, memory={"backend": "none"},
                  **fields)


def test_doctor_and_a_run_give_a_following_agent_the_same_options_and_environment(tmp_path, monkeypatch, listening):
    """aider follows an openai-compatible [agent]: the shell's OPENAI_API_KEY loses to the key
    `api_key_env` names (what following derives), which loses to a key given for the agent alone."""
    monkeypatch.setenv("OPENAI_API_KEY", "the-shell-s")
    monkeypatch.setenv("LOCAL_KEY", "the-server-s")
    cfg = config(tmp_path, agent={"provider": "openai-compatible", "base_url": listening, "model": "llama",
                                  "api_key_env": "LOCAL_KEY"}, coding_agent={"kind": "aider"})
    for given, key in [({}, "the-server-s"), ({"OPENAI_API_KEY": "given-to-aider"}, "given-to-aider")]:
        with Services(cfg, coding_agent_env=given) as services:
            agent = services.coding_agent  # what `middle run` drives
            options, environ = _followed(cfg, services.registry, "aider", services.coding_agent_env)  # doctor's
            assert agent.options == options and agent.options.openai_api_base == listening
            assert {**environ, **agent.env} == environ and environ["OPENAI_API_KEY"] == key, given


def test_the_local_model_note_prices_the_base_url_the_run_s_agent_is_given(tmp_path, monkeypatch, listening):
    """A base URL given to the agent through the services (the Python API's coding_agent_env), not
    the shell: the note at the start of turns and the agent's turns see the same one. (Before one
    owner, the note read the shell alone and said nothing of the local server the turns called.)"""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cfg = config(tmp_path, coding_agent={"kind": "codex"})
    with Services(cfg, coding_agent_env={"OPENAI_BASE_URL": listening}) as services:
        assert services.coding_agent.env["OPENAI_BASE_URL"] == listening
        note = " ".join((local_note_once(services) or "").split())
    assert note.startswith("codex: ") and f"served at a local address ({listening})" in note, note


def run(project_dir: Path, *args: str):
    result = CliRunner().invoke(main, ["run", *args])
    return result, [line for line in result.output.splitlines() if line.startswith("error:")]


def test_a_dead_base_url_is_asked_only_when_a_turn_would_start(project_dir):
    """`middle run` with nothing to run says so (exit 0) without asking the model server; with a
    ticket, the one `error:` line comes before it is claimed: pending, no run, no worktree. Doctor
    names the same followed base URL."""
    url = dead_url()
    (project_dir / "middle.toml").write_text(
        f'[project]\npath = "repo"\n[agent]\nprovider = "openai-compatible"\nbase_url = "{url}"\nmodel = "llama"\n'
        '[coding_agent]\nkind = "aider"\n')
    result, errors = run(project_dir)
    assert result.exit_code == 0 and errors == [] and "no pending tickets" in result.output, result.output
    assert "nothing answers" not in result.output, result.output

    (project_dir / "tickets" / "t1.md").write_text("---\ntitle: A\nproject: repo\nid: t1\n---\nWrite a.txt.\n")
    result, errors = run(project_dir)
    out = " ".join(result.output.split())
    assert result.exit_code != 0 and "Traceback" not in out, out
    assert errors == [f"error: nothing answers at aider's model API {url} (connection refused at 127.0.0.1 port "
                      f"{url.split(':')[2].split('/')[0]}): start that server, or correct the base URL aider is "
                      "given; no ticket was started"], result.output
    listed = " ".join(CliRunner().invoke(main, ["tickets"]).output.split())
    assert "t1" in listed and "pending" in listed, listed
    worktrees = project_dir / ".middle" / "worktrees"
    assert not worktrees.exists() or not any(worktrees.iterdir()), sorted(worktrees.iterdir())

    doctor = " ".join(CliRunner().invoke(main, ["doctor"]).output.split())
    assert f"nothing answers at {url} (connection refused" in doctor, doctor
