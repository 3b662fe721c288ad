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
    assert {"plugins.md", "hooks.md", "memory-backend.md", "worker.md", "ticket-source.md",
            "testing.md", "benchmarks.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_parses(page):
    for code in blocks(page):
        ast.parse(textwrap.dedent(code))  # an excerpt of a method is indented


@pytest.fixture
def shell_agent(tmp_path, monkeypatch):
    """docs/worker.md's worker and plugin, as the package the page names."""
    worker, plugin, _ = blocks(DOCS / "worker.md")
    pkg = tmp_path / "site" / "shell_agent_worker"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "worker.py").write_text(worker)
    (pkg / "plugin.py").write_text(plugin)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield
    for name in [m for m in sys.modules if m.split(".")[0] == "shell_agent_worker"]:
        del sys.modules[name]


def test_the_worker_tutorial_runs_a_ticket_through_the_graph(shell_agent, tmp_path):
    test_code = blocks(DOCS / "worker.md")[2]
    namespace: dict = {}
    exec(compile(test_code, "docs/worker.md", "exec"), namespace)
    namespace["test_a_ticket_runs_on_the_shell_agent"](tmp_path / "run")


def test_the_tutorial_worker_answers_fails_and_refuses_as_the_page_says(shell_agent, tmp_path):
    from orchestrator.errors import ConfigError, WorkerError
    from orchestrator.plugins.manager import PluginRegistry
    from shell_agent_worker import plugin
    from shell_agent_worker.worker import ShellAgentOptions, ShellAgentWorker

    events: list[dict] = []
    ok = ShellAgentWorker(ShellAgentOptions(command=["cat"])).run_turn(
        "add a test", tmp_path, session_id="s1", resume=False, on_event=events.append)
    assert (ok.text, ok.is_error, ok.session_id, events[0]["type"]) == ("add a test", False, "s1", "text")
    failed = ShellAgentWorker(ShellAgentOptions(command=["false"])).run_turn(
        "x", tmp_path, session_id="s1", resume=True)
    assert failed.is_error and failed.error.startswith("the agent exited with 1")
    with pytest.raises(WorkerError, match="is not installed"):
        ShellAgentWorker(ShellAgentOptions(command=["no-such-agent-here"])).run_turn(
            "x", tmp_path, session_id=None, resume=False)
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(plugin,))
    with pytest.raises(ConfigError) as refused:
        registry.worker_options("shell-agent", {"command": ["my-agent"], "turn_timout_s": 300})
    shown = re.search(r"`(error: bad \[worker\.options\].*?)`\.", (DOCS / "worker.md").read_text(), re.DOTALL)
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
                from orchestrator.config.memo import is_setting  # a MIDDLE_<SECTION>_<KEY> override

                assert is_setting(name), f"{page.name} names {name}"
                continue
            assert name in code, f"{page.name} names {name}, which no code reads"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"
