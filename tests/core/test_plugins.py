"""The plugin registry: built-ins through the same hook, strict names and options, entry points."""

from __future__ import annotations

import re

import pytest

from orchestrator.errors import ConfigError
from orchestrator.plugin_api import MemoryBackend, hookimpl
from orchestrator.plugins.manager import DEFAULT_PLUGINS, PluginRegistry


class _Dummy(MemoryBackend):
    name = "sliding_window"  # clashes with the built-in

    def index(self, docs): ...
    def retrieve(self, queries, num_to_retrieve): return []
    def delete(self, docs): return 0


def _plugin(cls):
    class P:
        @hookimpl
        def register_memory_backends(self, register):
            register(cls)
    return P()


def test_builtins_register_through_the_hook():
    reg = PluginRegistry(load_entry_points=False)
    assert {"none", "sliding_window"} <= set(reg.backends)
    assert reg.backends["sliding_window"].plugin == "backends.sliding_window.plugin"
    assert "claude-code" in reg.coding_agents
    assert set(DEFAULT_PLUGINS) <= {r["name"] for r in reg.plugin_rows()}


def test_unknown_backend_lists_the_known_ones():
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(ConfigError) as err:
        reg.backend_class("hipporag_typo")
    assert "unknown memory backend 'hipporag_typo'" in str(err.value)
    assert "sliding_window" in str(err.value) and "middle backends" in str(err.value)


def test_unknown_backend_option_is_an_error_listing_allowed_options():
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(ConfigError) as err:
        reg.backend_options("sliding_window", {"windw_size": 3})
    assert "windw_size" in str(err.value) and "window_size" in str(err.value)
    assert reg.backend_options("sliding_window", {"window_size": 4}).window_size == 4


def test_duplicate_names_are_refused():
    with pytest.raises(ConfigError, match="registered twice"):
        _ = PluginRegistry(load_entry_points=False, extra_plugins=(_plugin(_Dummy),)).backends


def test_bad_registrations_are_refused():
    class NotABackend:
        name = "fine_name"

    with pytest.raises(ConfigError, match="not a subclass"):
        _ = PluginRegistry(load_entry_points=False, extra_plugins=(_plugin(NotABackend),)).backends

    class BadName(_Dummy):
        name = "Bad Name!"

    with pytest.raises(ConfigError, match="bad name"):
        _ = PluginRegistry(load_entry_points=False, extra_plugins=(_plugin(BadName),)).backends


@pytest.mark.installed_plugins
def test_entry_point_plugin_is_loaded_from_its_distribution():
    pytest.importorskip("middle_agent_keyword_memory", reason="install plugins/middle-agent-keyword-memory")
    reg = PluginRegistry()
    assert "keyword" in reg.backends
    row = next(r for r in reg.plugin_rows() if "keyword" in r["name"])
    assert "middle-agent-keyword-memory" in row["source"] and "entry point" in row["source"]


@pytest.mark.installed_plugins
def test_entry_point_backend_selected_by_name_in_config_runs_tickets(tmp_path):
    pytest.importorskip("middle_agent_keyword_memory", reason="install plugins/middle-agent-keyword-memory")
    from orchestrator.config.settings import Config
    from orchestrator.running.orchestrator import Orchestrator
    from orchestrator.testing import make_repo
    from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
    from tickets.model import Ticket

    make_repo(tmp_path / "repo")
    cfg = Config(root=tmp_path, state_dir="state",
                 memory={"backend": "keyword", "save_dir": "mem", "options": {"min_overlap": 1}})
    llm = ScriptedAgentLLM([plan_reply("p"), decision_reply(True, "greeting uses f-strings"),
                            plan_reply("q"), decision_reply(True, "farewell done")])
    with Orchestrator(cfg, llm=llm, coding_agent=RecordingCodingAgent(["ok", "ok"])) as orch:
        for tid, title in (("t1", "Add greeting"), ("t2", "Add farewell like greeting")):
            orch.store.upsert_ticket(Ticket(id=tid, project_id="calc", title=title,
                                            project_path=str(tmp_path / "repo")))
            assert orch.run_ticket(tid).status == "complete"
    assert (tmp_path / "mem" / "calc" / "keyword_memory.json").exists()
    assert re.match(r"Memories invoked:\nRecent work \(newest first\):\n- [\d-]{10} \[[0-9a-f]{8}\] "
                    r"Ticket: Add greeting\. \. greeting uses f-strings", llm.user_messages[2])


def test_a_third_party_worker_kind_gets_its_own_options(tmp_path):
    from pydantic import BaseModel, ConfigDict

    from orchestrator.config.settings import Config
    from orchestrator.running.orchestrator import Orchestrator
    from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM

    class EchoOptions(BaseModel):
        model_config = ConfigDict(extra="forbid")
        turn_timeout_s: float = 1.0

    class EchoAgent(RecordingCodingAgent):
        kind = "echo"
        Options = EchoOptions

        def __init__(self, options, env=None):
            super().__init__()
            self.options = options

    class P:
        @hookimpl
        def register_coding_agents(self, register):
            register(EchoAgent)

    reg = PluginRegistry(load_entry_points=False, extra_plugins=(P(),))
    cfg = Config(root=tmp_path, state_dir="s", coding_agent={"kind": "echo", "options": {"turn_timeout_s": 7}})
    with Orchestrator(cfg, llm=ScriptedAgentLLM([]), registry=reg) as orch:
        assert isinstance(orch.coding_agent, EchoAgent) and orch.coding_agent.options.turn_timeout_s == 7

    class NoOptions:
        kind = "broken"

        def run_turn(self): ...

    with pytest.raises(ConfigError, match="without an `Options` model"):
        _ = PluginRegistry(load_entry_points=False, extra_plugins=(type("Q", (), {
            "register_coding_agents": hookimpl(lambda self, register: register(NoOptions))})(),)).coding_agents


def test_a_registry_built_for_commands_imports_no_backend_code():
    """`middle --help` loads the plugins for their commands; the backends' heavy libraries
    (NumPy, FAISS, SciPy) load only once a backend is asked for."""
    import subprocess
    import sys

    code = (
        "import sys; from orchestrator.plugins.manager import PluginRegistry; "
        "r = PluginRegistry(load_entry_points=False); "
        "r.hook.register_commands.get_hookimpls(); "
        "print(sorted(m for m in ('numpy', 'faiss', 'scipy', 'backends.storage') if m in sys.modules)); "
        "r.backends; print(sorted(m for m in ('numpy', 'backends.storage') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "['backends.storage', 'numpy']"


def test_middle_load_plugins_chooses_the_entry_points_that_load(monkeypatch):
    pytest.importorskip("middle_agent_keyword_memory", reason="install plugins/middle-agent-keyword-memory")
    monkeypatch.setenv("MIDDLE_LOAD_PLUGINS", "")
    assert "keyword" not in PluginRegistry().backends
    monkeypatch.setenv("MIDDLE_LOAD_PLUGINS", "middle-agent-keyword-memory")  # the package's name
    assert "keyword" in PluginRegistry().backends
    monkeypatch.setenv("MIDDLE_LOAD_PLUGINS", "middle-agent-keyword-memory,someone-else")  # a typo, or not installed
    with pytest.raises(ConfigError, match="MIDDLE_LOAD_PLUGINS names someone-else, which no installed plugin is"):
        PluginRegistry()
    monkeypatch.delenv("MIDDLE_LOAD_PLUGINS")
    assert "keyword" in PluginRegistry().backends


def test_one_registry_per_process_even_for_middle_memory(monkeypatch, tmp_path):
    """`middle memory list` used to build the plugin registry twice; now every part asks the one."""
    from click.testing import CliRunner

    from orchestrator.cli import main as cli
    from orchestrator.plugins import manager as plugins

    built = []
    real = plugins.PluginRegistry.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(plugins.PluginRegistry, "__init__", counting)
    monkeypatch.setattr(plugins, "_REGISTRY", None)
    monkeypatch.setattr(cli.MiddleGroup, "_plugins_loaded", False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "middle.toml").write_text('[memory]\nsave_dir = "mem"\nbackend = "bm25"\n')
    result = CliRunner().invoke(cli.main, ["memory", "list"])
    assert result.exit_code == 0, result.output
    assert len(built) == 1
