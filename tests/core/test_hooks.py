"""One test per hook, each through the real code path that calls it (as datasette's
test_plugin_hooks_have_tests asks): a new hook without a test here fails the first test."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from orchestrator.config.settings import Config
from orchestrator.plugin_api import TurnRecord, TurnResult, hookimpl
from orchestrator.plugins import hookspecs
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import InMemoryBackend, make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from tickets.model import Ticket


def test_plugin_hooks_have_tests():
    hooks = [n for n, fn in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(fn, "middle_agent_spec")]
    tests = {n for n in dir(sys.modules[__name__]) if n.startswith("test_hook_")}
    assert len(hooks) >= 7
    assert not [h for h in hooks if f"test_hook_{h}" not in tests]


class Recorder:
    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    @hookimpl
    def on_ticket_start(self, ticket, run_id):
        self.calls.append(("start", {"ticket": ticket, "run_id": run_id}))

    @hookimpl
    def on_turn_end(self, ticket, run_id, turn):
        self.calls.append(("turn", {"ticket": ticket, "run_id": run_id, "turn": turn}))

    @hookimpl
    def on_ticket_complete(self, ticket, run_id, summary):
        self.calls.append(("complete", {"ticket": ticket, "summary": summary}))

    @hookimpl
    def on_ticket_failed(self, ticket, run_id, reason):
        self.calls.append(("failed", {"ticket": ticket, "reason": reason}))


def _run(tmp_path: Path, replies: list[str], worker_script: list, max_turns: int = 5):
    recorder = Recorder()
    config = Config(root=tmp_path, state_dir="state", agent={"max_turns": max_turns, "max_cost_usd": 5.0})
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(recorder,))
    repo = make_repo(tmp_path / "repo")
    with Orchestrator(config, llm=ScriptedAgentLLM(replies), coding_agent=RecordingCodingAgent(worker_script),
                      registry=registry) as orch:
        orch.store.upsert_ticket(Ticket(id="t1", project_id="p", title="T", project_path=str(repo)))
        outcome = orch.run_ticket("t1")
    return outcome, recorder.calls


def test_hook_on_ticket_start(tmp_path):
    _, calls = _run(tmp_path, [plan_reply("p"), decision_reply(True, "s")], ["ok"])
    start = [c for name, c in calls if name == "start"]
    assert len(start) == 1 and start[0]["ticket"].status.value == "running" and start[0]["run_id"]


def test_hook_on_turn_end(tmp_path):
    _, calls = _run(tmp_path, [plan_reply("first"), decision_reply(False, next_prompt="second"),
                               decision_reply(True, "s")], ["one", "two"])
    turns = [c["turn"] for name, c in calls if name == "turn"]
    assert [type(t) for t in turns] == [TurnRecord, TurnRecord]
    assert [(t.turn_no, t.prompt, t.response, t.status) for t in turns] == [
        (1, "first", "one", "done"), (2, "second", "two", "done")]
    assert turns[0]["response"] == "one"  # the old dict access still works


def test_hook_on_ticket_complete(tmp_path):
    outcome, calls = _run(tmp_path, [plan_reply("p"), decision_reply(True, "all done")], ["ok"])
    assert outcome.status == "complete"
    done = [c for name, c in calls if name == "complete"]
    assert len(done) == 1 and done[0]["summary"] == "all done" and done[0]["ticket"].status.value == "complete"
    assert [name for name, _ in calls] == ["start", "turn", "complete"]


def test_hook_on_ticket_failed(tmp_path):
    outcome, calls = _run(tmp_path, [plan_reply("p"), decision_reply(False, next_prompt="again")], ["ok"],
                          max_turns=1)
    assert outcome.status == "failed"
    failed = [c for name, c in calls if name == "failed"]
    assert len(failed) == 1 and "turn limit" in failed[0]["reason"]
    assert failed[0]["ticket"].status.value == "failed"


class TinyBackend(InMemoryBackend):
    name = "tiny"


class EchoAgent:
    kind = "echo"

    class Options:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    def __init__(self, options=None, env=None):
        self.options = options

    def run_turn(self, prompt, cwd, *, session_id, resume, on_event=None):
        return TurnResult(session_id=session_id, text=prompt)


class Registrar:
    @hookimpl
    def register_memory_backends(self, register):
        register(TinyBackend)

    @hookimpl
    def register_coding_agents(self, register):
        register(EchoAgent)

    @hookimpl
    def register_commands(self, cli):
        @click.command(name="hello-plugin")
        def hello():
            """Say hello from a plugin."""
            click.echo("hello from a plugin")

        cli.add_command(hello)


def test_hook_register_memory_backends():
    reg = PluginRegistry(load_entry_points=False, extra_plugins=(Registrar(),))
    assert reg.backend_class("tiny") is TinyBackend and reg.backends["tiny"].plugin


def test_hook_register_coding_agents():
    reg = PluginRegistry(load_entry_points=False, extra_plugins=(Registrar(),))
    assert reg.coding_agent_class("echo") is EchoAgent
    assert reg.coding_agent_options("echo", {"x": 1}).kwargs == {"x": 1}


def test_hook_register_ticket_sources():
    from orchestrator.plugin_api import LoadResult, hookimpl

    class ListSource:
        kind = "list"
        argument = "path"
        where = "a list"

        @classmethod
        def open(cls, options, context):
            return cls()

        def load(self):
            return LoadResult()

    class SourcePlugin:
        @hookimpl
        def register_ticket_sources(self, register):
            register(ListSource)

    reg = PluginRegistry(load_entry_points=False, extra_plugins=(SourcePlugin(),))
    assert reg.source_class("list") is ListSource
    assert reg.source_class("markdown").__name__ == "MarkdownFolderSource"  # built in, by the same hook
    with pytest.raises(Exception, match="unknown ticket source 'nope'"):
        reg.source_class("nope")


def test_hook_register_commands(monkeypatch):
    from orchestrator.cli import main as cli
    from orchestrator.plugins import manager as plugins

    monkeypatch.setattr(plugins, "_REGISTRY", PluginRegistry(load_entry_points=False, extra_plugins=(Registrar(),)))
    monkeypatch.setattr(cli.MiddleGroup, "_plugins_loaded", False)
    result = CliRunner().invoke(cli.main, ["hello-plugin"])
    assert result.exit_code == 0 and result.output == "hello from a plugin\n"
    cli.main.commands.pop("hello-plugin", None)
