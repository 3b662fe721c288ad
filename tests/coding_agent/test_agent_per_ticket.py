"""A ticket picks its coding agent (`coding_agent:` front matter): a mixed batch, where each ticket
runs on its own agent; an unknown kind is one `error:` line; a session is resumed only by the
agent that made it."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.config.settings import load_config
from orchestrator.errors import ConfigError
from orchestrator.plugins import manager
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import make_repo
from orchestrator.testing.plugins import fresh_registry
from tickets.store import TicketStore

pytestmark = pytest.mark.cli

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
# The shell agent's command: writes shell.txt and says so as the demo model wants to hear it.
SHELL_COMMAND = [sys.executable, "-c", "import pathlib, sys; sys.stdin.read(); "
                 "pathlib.Path('shell.txt').write_text('made by the shell agent\\n'); print('Created shell.txt.')"]
CLAUDE_TICKET = "---\ntitle: Notes\nproject: calc\nid: t1\n---\nCreate `notes.txt` with:\n```\nhello\n```\n"
SHELL_TICKET = ("---\ntitle: Shell\nproject: calc\nid: t2\ncoding_agent: shell-agent\n---\n"
                "Create `shell.txt` with:\n```\nmade by the shell agent\n```\n")


@pytest.fixture
def shell_plugin(tmp_path, monkeypatch):
    """docs/coding-agent.md's toy shell agent, installed as the plugin package the page names."""
    agent, plugin = BLOCK.findall((DOCS / "coding-agent.md").read_text())[:2]
    pkg = tmp_path / "site" / "shell_agent_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text(agent)
    (pkg / "plugin.py").write_text(plugin)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    import shell_agent_plugin.plugin

    fresh_registry(monkeypatch)  # `middle` then loads this registry, with the plugin in it
    monkeypatch.setattr(manager, "_REGISTRY", PluginRegistry(load_entry_points=False,
                                                             extra_plugins=(shell_agent_plugin.plugin,)))
    yield shell_agent_plugin.plugin
    for name in [m for m in sys.modules if m.split(".")[0] == "shell_agent_plugin"]:
        del sys.modules[name]


def project(root: Path, tickets: dict[str, str], extra: str = "") -> Path:
    make_repo(root / "repo", {"README.md": "# calc\n"})
    (root / "tickets").mkdir()
    for name, text in tickets.items():
        (root / "tickets" / name).write_text(text)
    (root / "middle.toml").write_text(textwrap.dedent(f"""\
        state_dir = "{root / 'state'}"
        [project]
        path = "repo"
        tickets_dir = "tickets"
        [memory]
        backend = "none"
        [coding_agent.options]
        allowed_tools = ["Read", "Write", "Edit"]
        turn_timeout_s = 120
        [coding_agents.shell-agent]
        command = {json.dumps(SHELL_COMMAND)}
        """) + extra)
    return root / "middle.toml"


def middle(config: Path, *args: str):
    return CliRunner().invoke(main, ["--config", str(config), *args], catch_exceptions=False)


def test_a_batch_runs_each_ticket_on_the_agent_it_names(shell_plugin, tmp_path, claude_cli):
    config = project(tmp_path, {"t1.md": CLAUDE_TICKET, "t2.md": SHELL_TICKET})
    result = middle(config, "run", "--fake", "-j", "2")
    assert result.exit_code == 0, result.output
    worktrees = tmp_path / "state" / "worktrees"
    # Claude Code wrote t1's file (its Write tool, answered by the demo model); the shell agent t2's.
    assert (worktrees / "t1" / "notes.txt").read_text() == "hello\n"
    assert (worktrees / "t2" / "shell.txt").read_text() == "made by the shell agent\n"
    assert not (worktrees / "t1" / "shell.txt").exists() and not (worktrees / "t2" / "notes.txt").exists()
    store = TicketStore(load_config(config).store_target)
    try:
        assert [r["status"] for r in (store.latest_run("t1"), store.latest_run("t2"))] == ["complete", "complete"]
        assert [t["coding_agent"] for t in store.list_turns(ticket_id="t1")] == ["claude-code"]
        assert [t["coding_agent"] for t in store.list_turns(ticket_id="t2")] == ["shell-agent"]
        events = {tid: [e["data"] for e in store.list_events(ticket_id=tid) if e["kind"] == "coding_agent"]
                  for tid in ("t1", "t2")}
    finally:
        store.close()
    # Claude Code's own stream (its init line) for t1 only; the shell agent's note for t2 only.
    assert any(e.get("type") == "init" for e in events["t1"])
    assert not any(e.get("type") == "init" for e in events["t2"])
    assert any("running " in (e.get("text") or "") for e in events["t2"])
    assert not any("running " in (e.get("text") or "") for e in events["t1"])


@pytest.mark.parametrize("named", [False, True])
def test_a_ticket_naming_an_unknown_agent_is_one_error_line(shell_plugin, tmp_path, named):
    """Named or in the batch: one `error:` line, the ticket untouched (pending, no run), never a
    "failed" line for a ticket that did not start; the batch's other tickets still run."""
    ticket = "---\ntitle: T\nproject: calc\nid: t1\ncoding_agent: nope\n---\nCreate `a.txt` with:\n```\na\n```\n"
    config = project(tmp_path, {"t1.md": ticket, "t2.md": SHELL_TICKET})
    result = middle(config, "run", "--fake", *(["t1"] if named else []))
    assert result.exit_code != 0
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert "coding_agent: nope" in errors[0] and "claude-code" in errors[0] and "shell-agent" in errors[0]
    assert "Traceback" not in result.output and "failed ticket t1" not in " ".join(result.output.split())
    with TicketStore(load_config(config).store_target) as store:
        assert store.get_ticket("t1").status.value == "pending" and store.latest_run("t1") is None
        assert store.get_ticket("t2").status.value == ("pending" if named else "complete")


def test_a_session_is_not_resumed_by_another_agent(shell_plugin, tmp_path, claude_cli):
    """Round 1 ran on the shell agent; the ticket then names Claude Code: round 2 (feedback) starts
    a new Claude Code session told the earlier work, rather than resuming the shell agent's."""
    config_path = project(tmp_path, {"t1.md": SHELL_TICKET.replace("id: t2", "id: t1")})
    config = load_config(config_path)
    registry = manager.registry()
    with Orchestrator(config, fake=True, registry=registry) as orch:
        orch.sync_tickets()
        assert orch.run_ticket("t1").status == "complete"
        (tmp_path / "tickets" / "t1.md").write_text(
            SHELL_TICKET.replace("id: t2", "id: t1").replace("coding_agent: shell-agent", "coding_agent: claude-code"))
        # No sync: the round reads the ticket's file as it is now (as `middle resume` does).
        said: list[str] = []
        orch.say = said.append
        outcome = orch.feedback("t1", "Create `notes.txt` with:\n```\nround two\n```\n")
        assert outcome.status == "complete", outcome
        turns = orch.store.list_turns(ticket_id="t1")
        requests = orch.services.fake_api.requests_for("coding_agent")
        # A kind no plugin registers, named before the next round: refused before anything is claimed.
        (tmp_path / "tickets" / "t1.md").write_text(
            SHELL_TICKET.replace("id: t2", "id: t1").replace("coding_agent: shell-agent", "coding_agent: nope"))
        with pytest.raises(ConfigError, match="names `coding_agent: nope`, which no plugin registers"):
            orch.feedback("t1", "more")
        assert orch.store.get_ticket("t1").status.value == "complete"
    assert [t["coding_agent"] for t in turns] == ["shell-agent", "claude-code"]
    assert turns[1]["resume"] is False and turns[1]["session_id"] != turns[0]["session_id"]
    assert "The earlier session" not in turns[1]["prompt"] and "continuing work" in turns[1]["prompt"]
    assert any("session ran on shell-agent" in s and "claude-code" in s for s in said), said
    assert (tmp_path / "state" / "worktrees" / "t1" / "notes.txt").read_text() == "round two\n"
    assert requests, "Claude Code never asked the fake"


def test_coding_agents_tables_are_checked_as_the_agent_options_are(shell_plugin, tmp_path):
    config = project(tmp_path, {"t1.md": CLAUDE_TICKET}, extra="[coding_agents.claude-code]\nturn_timout_s = 5\n")
    result = middle(config, "tickets")
    assert result.exit_code != 0
    assert "error: bad [coding_agents.claude-code] for coding agent 'claude-code': turn_timout_s" in result.output


def test_a_coding_agents_table_of_an_unknown_kind_is_one_error_line(shell_plugin, tmp_path):
    config = project(tmp_path, {"t1.md": CLAUDE_TICKET}, extra="[coding_agents.nope]\nmodel = \"x\"\n")
    result = middle(config, "tickets")
    assert result.exit_code != 0
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: [coding_agents.nope] names no registered coding agent: choose one of ")
    assert "claude-code" in line and "shell-agent" in line and line.endswith("(`middle agents` lists them)")


def test_a_coding_agent_that_is_not_a_name_is_a_broken_ticket_file(shell_plugin, tmp_path):
    config = project(tmp_path, {"t1.md": CLAUDE_TICKET.replace("id: t1", "id: t1\ncoding_agent: [a, b]")})
    result = middle(config, "tickets")
    assert "'coding_agent' must name a coding agent's kind" in " ".join(result.output.split())


@pytest.mark.parametrize("named", [False, True])
def test_a_ticket_on_an_agent_whose_cli_is_missing_is_one_error_before_any_claim(shell_plugin, tmp_path, named):
    """Every ticket on that agent would fail the same way: said once, with the install command,
    before a ticket is claimed (it stays pending), whether the ticket is named or the batch runs."""
    ticket = CLAUDE_TICKET.replace("id: t1\n", "id: t1\ncoding_agent: codex\n")
    config = project(tmp_path, {"t1.md": ticket},
                     extra=f'[coding_agents.codex]\ncli_path = "{tmp_path / "no-codex"}"\n')
    result = middle(config, "run", "--fake", *(["t1"] if named else []))
    assert result.exit_code != 0
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "npm install -g @openai/codex@" in errors[0], result.output
    assert "Traceback" not in result.output
    with TicketStore(load_config(config).store_target) as store:
        assert store.get_ticket("t1").status.value == "pending" and store.latest_run("t1") is None


def test_a_missing_cli_holds_only_the_tickets_on_that_agent(shell_plugin, tmp_path):
    """Tickets on an agent whose CLI is not here stay pending (one error line, naming that agent's
    own options table); the batch's tickets on other agents still run (they used to stay pending
    too, the whole batch stopped by it)."""
    on_codex = CLAUDE_TICKET.replace("id: t1\n", "id: {id}\ncoding_agent: codex\n")
    config = project(tmp_path, {"a1.md": on_codex.format(id="a1"), "a2.md": on_codex.format(id="a2"),
                                "t2.md": SHELL_TICKET},
                     extra=f'[coding_agents.codex]\ncli_path = "{tmp_path / "no-codex"}"\n')
    result = middle(config, "run", "--fake")
    assert result.exit_code != 0 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "npm install -g @openai/codex@" in errors[0], result.output
    assert "[coding_agents.codex] cli_path" in errors[0], errors  # not claude-code's table
    assert "complete ticket t2" in result.output, result.output
    with TicketStore(load_config(config).store_target) as store:
        assert store.get_ticket("t2").status.value == "complete"
        for tid in ("a1", "a2"):
            assert store.get_ticket(tid).status.value == "pending" and store.latest_run(tid) is None


def test_a_failed_turn_on_a_ticket_s_own_agent_names_that_agent_s_options_table(shell_plugin, tmp_path):
    """An agent's messages say `[coding_agent.options]`; for a kind a ticket picks that table is the
    configured agent's (Claude Code's here): the failure names `[coding_agents.<kind>]` instead."""
    config = project(tmp_path, {"t2.md": SHELL_TICKET})
    text = config.read_text().replace(
        "[coding_agents.shell-agent]\n",
        "[coding_agents.shell-agent]\nturn_timeout_s = 0.5\n").replace(
        json.dumps(SHELL_COMMAND), json.dumps([sys.executable, "-c", "import time; time.sleep(30)"]))
    config.write_text(text)
    result = middle(config, "run", "--fake", "t2")
    out = " ".join(result.output.split())
    assert result.exit_code != 0 and "Traceback" not in out
    assert "raise [coding_agents.shell-agent] turn_timeout_s" in out, out
    assert "[coding_agent.options] turn_timeout_s" not in out, out
