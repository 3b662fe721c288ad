"""docs/hooks.md lists every hook with its full typed signature and description, exactly as
hookspecs.py has them; the tutorials document the plugin API's parts."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from orchestrator.plugins import hookspecs

DOCS = Path(__file__).resolve().parents[2] / "docs"
HOOKS = DOCS / "hooks.md"


def _hooks() -> dict[str, object]:
    return {name: fn for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(fn, "middle_agent_spec")}


def _signature(name: str, fn) -> str:
    sig = inspect.signature(fn)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


def _sections() -> dict[str, str]:
    """docs/hooks.md's `## name` sections, by name."""
    parts = re.split(r"^## ", HOOKS.read_text(encoding="utf-8"), flags=re.M)[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def test_every_hook_has_a_section_with_its_signature_description_call_and_return():
    hooks, sections = _hooks(), _sections()
    assert len(hooks) >= 7
    for name, fn in hooks.items():
        assert name in sections, f"docs/hooks.md has no `## {name}` section"
        section = sections[name]
        assert f"`{_signature(name, fn)}`" in section, f"docs/hooks.md should show `{_signature(name, fn)}`"
        assert f"> {fn.__doc__.strip()}" in section, f"docs/hooks.md should quote {name}'s docstring"
        assert "**Called**" in section and "**Returns**" in section, name


def test_the_docs_name_no_hook_that_does_not_exist():
    assert set(_sections()) <= set(_hooks()), set(_sections()) - set(_hooks())
    for doc in DOCS.glob("*.md"):
        documented = set(re.findall(r"`((?:on|register)_[a-z_]+)\(", doc.read_text(encoding="utf-8")))
        assert documented <= set(_hooks()), (doc.name, documented - set(_hooks()))


def test_every_hook_has_a_one_line_docstring_and_types():
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if hasattr(fn, "middle_agent_spec"):
            assert fn.__doc__ and "\n" not in fn.__doc__.strip(), name
            assert all(p.annotation is not inspect.Parameter.empty
                       for p in inspect.signature(fn).parameters.values()), name


def test_every_public_member_of_the_backend_base_is_documented():
    from orchestrator.plugin_api import MemoryBackend

    text = (DOCS / "memory-backend.md").read_text(encoding="utf-8")
    members = [m for m in vars(MemoryBackend) if not m.startswith("_") or m == "__init__"]
    members += ["store_dir", "options", "llm"]  # set by __init__
    missing = [m for m in members if f"`{m}`" not in text and f"`{m}(" not in text]
    assert not missing, f"docs/memory-backend.md does not document MemoryBackend members {missing}"


def test_every_name_plugin_api_exports_is_importable_and_the_coding_agent_parts_are_documented():
    import orchestrator.plugin_api as api

    for name in api.__all__:
        assert getattr(api, name) is not None, name
    text = (DOCS / "coding-agent.md").read_text(encoding="utf-8")
    for name in ("CodingAgent", "TurnResult", "TurnRecord", "EventCallback", "CodingAgentError"):
        assert name in api.__all__ and f"`{name}`" in text, name


def test_the_ticket_source_parts_are_documented():
    import dataclasses

    import orchestrator.plugin_api as api
    from orchestrator.testing.source_contract import Backlog, TicketSpec
    from tickets.source import SourceContext

    text = (DOCS / "ticket-source.md").read_text(encoding="utf-8")
    for name in ("TicketSource", "SourceContext", "LoadResult", "TicketFileError", "TicketError",
                 "ConfigError", "Ticket", "TicketSourceContract", "TicketSpec"):
        assert name in api.__all__ and (f"`{name}`" in text or f"`{name}(" in text), name
    # What a source class and its instances have, what open() is given, what a backlog offers.
    members = ["kind", "argument", "open", "where", "load", "source_class", "backlog", "supports_broken"]
    members += [f.name for f in dataclasses.fields(SourceContext)]
    members += [f.name for f in dataclasses.fields(TicketSpec)]
    members += [m for m in vars(Backlog) if not m.startswith("_")]
    missing = [m for m in members if f"`{m}`" not in text and f"`{m}(" not in text]
    assert not missing, f"docs/ticket-source.md does not document {missing}"


def _rows(text: str, heading: str) -> str:
    """The `## heading` section of a page."""
    return re.split(r"^## ", text.split(f"\n## {heading}\n", 1)[1], flags=re.M)[0]


def test_the_plugins_index_lists_every_page_hook_and_export():
    import orchestrator.plugin_api as api

    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    pages = set(re.findall(r"^\| \[([\w-]+\.md)\]", _rows(text, "The pages"), re.M))
    # benchmarks.md and memory-benchmarks.md are the README's (middle-agent's own figures), and
    # design.md the whole product's design, and the README's reference pages a user's, not a plugin
    # author's pages.
    users = {"checks.md", "review.md", "runs.md", "configuration.md", "server.md", "memory.md", "providers.md"}
    assert pages == {p.name for p in DOCS.glob("*.md")} - {"plugins.md", "benchmarks.md", "memory-benchmarks.md",
                                                            "design.md", *users}
    hooks = re.findall(r"^\| `(\w+)\(([^)]*)\)`", _rows(text, "The hooks"), re.M)
    assert sorted(name for name, _ in hooks) == sorted(_hooks()), "one row per hook of hookspecs.py"
    for name, params in hooks:
        assert params.split(", ") == list(inspect.signature(_hooks()[name]).parameters), name
    imports = _rows(text, "What a plugin imports")
    missing = [name for name in api.__all__ if f"`{name}`" not in imports]
    assert not missing, f"docs/plugins.md does not list plugin_api's {missing}"
