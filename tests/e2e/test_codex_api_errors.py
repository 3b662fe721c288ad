"""What `middle run` does with a model API error Codex met (the real Codex CLI on the fake
Responses API): a model the provider does not have (404) stops the batch with one `error:` line
saying which setting to fix, the ticket back to pending (nothing was done); a server failing (503)
fails the ticket, resumable (`middle resume` retries the turn). api_errors.py has the kinds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import fresh_project, plan
from test_codex_e2e import toml_table

from orchestrator.coding_agent.codex import INSTALL, CodexAgent
from orchestrator.fake_api import api_error, claude_code_env
from orchestrator.testing.clis import require_cli
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli]

MIDDLE = str(Path(sys.executable).with_name("middle"))
TICKET = "---\ntitle: One file\nproject: calc\nid: t1\n---\nCreate one.txt.\n"


def _run(tmp_path: Path, fake_api, error) -> tuple[subprocess.CompletedProcess, str]:
    require_cli("codex", INSTALL)
    fresh_project(tmp_path, {"t1.md": TICKET})
    fake_api.script.agent(plan("Create one.txt containing one."))
    fake_api.script.coding_agent(*[error] * 6)  # (Codex retries a 5xx)
    with CodexAgent.offline(fake_api.script, tmp_path / "codex") as offline:
        (tmp_path / "middle.toml").write_text(
            'state_dir = "state"\n[project]\npath = "repo"\n[agent]\nmax_turns = 4\n'
            '[coding_agent]\nkind = "codex"\n' + toml_table("coding_agent.options", offline.options))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
        env = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"), **offline.env}
        result = subprocess.run([MIDDLE, "run"], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        status = store.get_ticket("t1").status.value
    return result, status


def test_a_model_the_provider_does_not_have_stops_the_run_saying_which_setting_to_fix(tmp_path, fake_api):
    result, status = _run(tmp_path, fake_api, api_error(
        404, "The model `gpt-nope` does not exist or you do not have access to it.", "invalid_request_error",
        code="model_not_found"))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert "(HTTP 404)" in output and "The model was not found: set `[coding_agent.options] model`" in output, output
    assert status == "pending"  # nothing was done: the next `middle run` takes it once the model is fixed


def test_a_server_failure_fails_the_ticket_resumable(tmp_path, fake_api):
    result, status = _run(tmp_path, fake_api, api_error(503, "overloaded", headers={"retry-after": "0"}))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    assert "(HTTP 503)" in output and "The model API's server failed" in output, output
    assert "middle resume t1" in output and status == "failed", output
