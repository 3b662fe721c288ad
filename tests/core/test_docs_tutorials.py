"""The plugin docs stay true: their code runs or parses, their excerpts match the example plugin,
and the commands, options, variables and links they name exist."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def blocks(page: Path, lang: str = "python") -> list[str]:
    return [code for kind, code in BLOCK.findall(page.read_text(encoding="utf-8")) if kind == lang]


def test_the_plugin_pages_exist():
    names = {p.name for p in PAGES}
    assert {"plugins.md", "hooks.md", "memory-backend.md", "coding-agent.md", "ticket-source.md",
            "testing.md", "benchmarks.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_parses(page):
    for code in blocks(page):
        ast.parse(textwrap.dedent(code))  # an excerpt of a method is indented


@pytest.fixture
def shell_agent(tmp_path, monkeypatch):
    """docs/coding-agent.md's coding agent and plugin, as the package the page names."""
    agent, plugin, _ = blocks(DOCS / "coding-agent.md")[:3]  # then the contract kit's example
    pkg = tmp_path / "site" / "shell_agent_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text(agent)
    (pkg / "plugin.py").write_text(plugin)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "shell_agent_plugin"]:
        del sys.modules[name]


def test_the_coding_agent_tutorial_runs_a_ticket_through_the_graph(shell_agent, tmp_path):
    test_code = blocks(DOCS / "coding-agent.md")[2]
    namespace: dict = {}
    exec(compile(test_code, "docs/coding-agent.md", "exec"), namespace)
    namespace["test_a_ticket_runs_on_the_shell_agent"](tmp_path / "run")


def test_the_tutorial_coding_agent_answers_fails_and_refuses_as_the_page_says(shell_agent, tmp_path):
    from shell_agent_plugin import plugin
    from shell_agent_plugin.agent import ShellAgent, ShellAgentOptions

    from orchestrator.errors import CodingAgentError, ConfigError
    from orchestrator.plugins.manager import PluginRegistry

    events: list[dict] = []
    ok = ShellAgent(ShellAgentOptions(command=["cat"])).run_turn(
        "add a test", tmp_path, session_id="s1", resume=False, on_event=events.append)
    assert (ok.text, ok.is_error, ok.session_id, events[0]["type"]) == ("add a test", False, "s1", "text")
    failed = ShellAgent(ShellAgentOptions(command=["false"])).run_turn(
        "x", tmp_path, session_id="s1", resume=True)
    assert failed.is_error and failed.error.startswith("the agent exited with 1")
    with pytest.raises(CodingAgentError, match="is not installed"):
        ShellAgent(ShellAgentOptions(command=["no-such-agent-here"])).run_turn(
            "x", tmp_path, session_id=None, resume=False)
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(plugin,))
    with pytest.raises(ConfigError) as refused:
        registry.coding_agent_options("shell-agent", {"command": ["my-agent"], "turn_timout_s": 300})
    shown = re.search(r"`(error: bad \[coding_agent\.options\].*?)`\.", (DOCS / "coding-agent.md").read_text(),
                      re.DOTALL)
    assert f"error: {refused.value}" == " ".join(shown.group(1).split())


def test_the_testing_page_example_runs(tmp_path):
    (code,) = [c for c in blocks(DOCS / "testing.md") if "def test_one_ticket" in c]
    namespace: dict = {}
    exec(compile(code, "docs/testing.md", "exec"), namespace)
    namespace["test_one_ticket"](tmp_path)


def test_the_memory_tutorial_quotes_the_keyword_plugin_exactly():
    text = (DOCS / "memory-backend.md").read_text(encoding="utf-8")
    excerpts = re.findall(r"<!-- excerpt: (\S+) -->\n```\w+\n(.*?)```", text, re.DOTALL)
    assert len(excerpts) >= 6
    for path, code in excerpts:
        assert code in (ROOT / path).read_text(encoding="utf-8"), f"docs/memory-backend.md quotes {path} wrongly"


def _command_lines() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        spans = re.findall(r"`(middle [^`]+)`", text)
        spans += [line for kind, code in BLOCK.findall(text) if kind in ("sh", "bash", "console")
                  for line in code.splitlines()]
        for span in spans:
            span = span.lstrip("$ ").split("#")[0].strip()
            if span.startswith("middle hook:"):  # a line of MIDDLE_TRACE_HOOKS output
                continue
            if span.startswith("middle ") or " middle " in span:
                found.append((page.name, span[span.index("middle "):]))
    return found


def test_every_middle_command_and_option_the_docs_name_exists(monkeypatch):
    from orchestrator.cli.main import main
    from orchestrator.testing.plugins import fresh_registry

    # The example plugin's `middle memory keywords`, from this checkout, for this test only.
    fresh_registry(monkeypatch)
    monkeypatch.syspath_prepend(str(ROOT / "plugins" / "middle-agent-keyword-memory"))
    from middle_agent_keyword_memory import plugin as keyword_plugin

    keyword_plugin.register_commands(main)

    commands = _command_lines()
    assert len(commands) >= 10
    for page, line in commands:
        command: click.Command = main
        ctx = click.Context(main)
        for word in line.split()[1:]:
            if word.startswith("-"):
                if word == "--help":
                    continue
                names = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
                assert word.split("=")[0] in names, f"{page}: `{line}`: {word} is no option of {command.name}"
            elif isinstance(command, click.Group):
                sub = command.get_command(ctx, word)
                takes_arguments = any(isinstance(p, click.Argument) for p in command.params)
                if sub is None and word.isidentifier() and not takes_arguments:
                    pytest.fail(f"{page}: `{line}`: no command {word!r} in {command.name}")
                if sub is None:
                    break  # an argument (a name, a path)
                command = sub
            # a word after a plain command is its argument


def test_every_variable_the_docs_name_is_read_by_the_code():
    code = "\n".join(p.read_text(encoding="utf-8") for folder in ("orchestrator", "tests")
                     for p in (ROOT / folder).rglob("*.py"))
    for page in PAGES:
        for name in set(re.findall(r"\bMIDDLE_[A-Z_]+\b", page.read_text(encoding="utf-8"))):
            if name.startswith(("MIDDLE_AGENT_", "MIDDLE_MEMORY_", "MIDDLE_STORE_")) and name not in code:
                from orchestrator.config.paths import is_setting  # a MIDDLE_<SECTION>_<KEY> override

                assert is_setting(name), f"{page.name} names {name}"
                continue
            assert name in code, f"{page.name} names {name}, which no code reads"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


@pytest.fixture
def jsonl_tickets(tmp_path, monkeypatch):
    """docs/ticket-source.md's source, plugin and contract test, as the package the page names,
    with the plugin registered through its hook in the process's registry (as if installed)."""
    from orchestrator.plugins import manager
    from orchestrator.plugins.manager import PluginRegistry

    code = blocks(DOCS / "ticket-source.md")
    (source,) = [c for c in code if "class JsonlSource" in c]
    (plugin,) = [c for c in code if "def register_ticket_sources" in c]
    (contract,) = [c for c in code if "(TicketSourceContract)" in c]
    site = tmp_path / "site"
    (site / "jsonl_tickets").mkdir(parents=True)
    (site / "jsonl_tickets" / "__init__.py").write_text("")
    (site / "jsonl_tickets" / "source.py").write_text(source)
    (site / "jsonl_tickets" / "plugin.py").write_text(plugin)
    (site / "test_jsonl_source.py").write_text(contract)
    monkeypatch.syspath_prepend(str(site))
    from jsonl_tickets import plugin as module

    monkeypatch.setattr(manager, "_REGISTRY", PluginRegistry(load_entry_points=False, extra_plugins=(module,)))
    yield site
    for name in [m for m in sys.modules if m.split(".")[0] == "jsonl_tickets"]:
        del sys.modules[name]


def _middle(*args: str):
    from click.testing import CliRunner

    from orchestrator.cli.main import main

    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def test_the_ticket_source_tutorial_syncs_its_file_through_the_hook(jsonl_tickets, tmp_path, monkeypatch):
    from tickets.store import TicketStore

    page = (DOCS / "ticket-source.md").read_text(encoding="utf-8")
    (config,) = [c for c in blocks(DOCS / "ticket-source.md", "toml") if c.startswith("# middle.toml")]
    (backlog,) = blocks(DOCS / "ticket-source.md", "json")
    project = tmp_path / "calc"
    project.mkdir()
    (project / "middle.toml").write_text(config)
    (project / "backlog.jsonl").write_text(backlog)
    monkeypatch.chdir(project)
    for var in ("MIDDLE_CONFIG", "MEMORY_SAVE_DIR"):
        monkeypatch.delenv(var, raising=False)

    result = _middle("sync")
    assert result.exit_code == 0, result.output
    assert "2 ticket(s)" in result.stdout and "2 new" in result.stdout
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        stored = {t.id: t for t in store.list_tickets()}
    assert sorted(stored) == ["GH-12", "GH-13"]
    assert stored["GH-12"].project_id == "calc" and stored["GH-12"].fields == {"labels": ["good first issue"]}
    assert stored["GH-12"].source == f"{project / 'backlog.jsonl'}:1"
    assert stored["GH-13"].depends_on == ["GH-12"] and stored["GH-12"].status.value == "pending"
    listed = _middle("tickets")
    assert "GH-12" in listed.stdout and "GH-13" in listed.stdout

    # A line it cannot read is one `skipped:` line naming the file, the line and the fix.
    with (project / "backlog.jsonl").open("a") as fh:
        fh.write('{"id": "GH-14"}\n')
    result = _middle("sync")
    assert result.exit_code == 1 and "2 ticket(s)" in result.stdout
    assert "skipped:" in result.stderr and "backlog.jsonl:3" in result.stderr and "'GH-14' has no" in result.stderr

    # --from KIND:ARG, as the page writes it: the file given, every other option at its default.
    (project / "exports").mkdir()
    (project / "exports" / "sprint-3.jsonl").write_text('{"id": "GH-20", "title": "Sprint 3", "project": "calc"}\n')
    (command,) = re.findall(r"`middle (sync --from jsonl:\S+\.jsonl)`", page)
    result = _middle(*command.split())
    assert result.exit_code == 0, result.output
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("GH-20").title == "Sprint 3"

    # The user's mistakes: one `error:` line each, as the page says.
    result = _middle("sync", "--from", "jsonl:nosuch.jsonl")
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and "does not exist" in result.stderr
    shown = re.search(r"`(error: unknown ticket source 'jsonll': [^`]*)`", page).group(1).rstrip(". ")
    result = _middle("sync", "--from", "jsonll:x")
    assert result.exit_code == 1 and result.stderr.startswith(shown), result.stderr
    (project / "middle.toml").write_text(config + 'pth = "backlog.jsonl"\n')
    result = _middle("sync")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: bad [tickets.options] for source 'jsonl': unknown option(s) pth. "
                                    "Allowed options: path, project"), result.stderr


def test_the_ticket_source_tutorial_passes_the_contract_suite(jsonl_tickets):
    import os
    import subprocess

    from orchestrator.testing.source_contract import TicketSourceContract

    # Its own pytest process: the page's test module, as a plugin's test folder holds it.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(jsonl_tickets), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_jsonl_source.py"],
        cwd=jsonl_tickets,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tests = [name for name in dir(TicketSourceContract) if name.startswith("test_")]
    assert proc.returncode == 0 and f"{len(tests)} passed" in proc.stdout, proc.stdout + proc.stderr
