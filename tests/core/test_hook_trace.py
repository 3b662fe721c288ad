"""MIDDLE_TRACE_HOOKS=1 prints every hook call to stderr: which plugin, with what, and its outcome."""

from __future__ import annotations

import os
import subprocess
import sys

from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry, call_hook


class Watcher:
    @hookimpl
    def on_ticket_start(self, ticket, run_id):
        return None


class Broken:
    @hookimpl
    def on_ticket_start(self, ticket, run_id):
        raise ValueError("the plugin's own bug")


def test_lifecycle_hook_calls_and_their_outcomes_are_traced(monkeypatch, capsys):
    monkeypatch.setenv("MIDDLE_TRACE_HOOKS", "1")
    reg = PluginRegistry(load_entry_points=False, extra_plugins=(Watcher(), Broken()))
    call_hook(reg.hook, "on_ticket_start", ticket="T-1", run_id="run-9")
    lines = capsys.readouterr().err.splitlines()
    traced = [line for line in lines if line.startswith("middle hook: ")]
    assert any("on_ticket_start -> " in line and "(ticket='T-1', run_id='run-9')" in line for line in traced)
    assert any("on_ticket_start <- " in line and "returned None" in line for line in traced)
    assert any("raised ValueError: the plugin's own bug" in line for line in traced)


def test_calls_through_pluggy_are_traced_too(monkeypatch, capsys):
    monkeypatch.setenv("MIDDLE_TRACE_HOOKS", "1")
    reg = PluginRegistry(load_entry_points=False, extra_plugins=(Watcher(),))
    reg.hook.on_ticket_start(ticket="T-2", run_id="r")
    err = capsys.readouterr().err
    assert "middle hook: on_ticket_start -> [" in err and "ticket='T-2'" in err
    assert "middle hook: on_ticket_start <- returned []" in err


def test_nothing_is_traced_without_the_variable(monkeypatch, capsys):
    monkeypatch.delenv("MIDDLE_TRACE_HOOKS", raising=False)
    reg = PluginRegistry(load_entry_points=False, extra_plugins=(Watcher(),))
    call_hook(reg.hook, "on_ticket_start", ticket="T-1", run_id="r")
    assert reg.backends
    assert "middle hook:" not in capsys.readouterr().err


def test_middle_traces_the_registration_hooks_to_stderr(tmp_path):
    env = {**os.environ, "MIDDLE_TRACE_HOOKS": "1"}
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "backends"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "middle hook: register_memory_backends -> backends.bm25.plugin(register=register)" in proc.stderr
    assert "middle hook: backends.bm25.plugin registered name 'bm25'" in proc.stderr
    assert "middle hook:" not in proc.stdout  # the trace never mixes with a command's output


def test_the_ticket_source_hook_is_traced_like_the_others(monkeypatch, capsys):
    from orchestrator.plugins.manager import PluginRegistry

    monkeypatch.setenv("MIDDLE_TRACE_HOOKS", "1")
    reg = PluginRegistry(load_entry_points=False)
    assert reg.source_class("markdown")
    err = capsys.readouterr().err
    assert "middle hook: register_ticket_sources -> tickets.plugin(register=register)" in err
