"""docs/plugins.md lists every hook with its full typed signature, exactly as hookspecs.py has it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from orchestrator.plugins import hookspecs
DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _specs() -> dict[str, str]:
    out = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if hasattr(fn, "middle_agent_spec"):
            params = ", ".join(f"{p.name}: {p.annotation}" for p in inspect.signature(fn).parameters.values())
            out[name] = f"{name}({params})"
    return out


def test_every_hook_is_documented_with_its_full_signature():
    specs, text = _specs(), DOC.read_text(encoding="utf-8")
    assert len(specs) >= 6
    for name, signature in specs.items():
        assert f"`{signature}`" in text, f"docs/plugins.md should show `{signature}`"


def test_the_docs_name_no_hook_that_does_not_exist():
    documented = set(re.findall(r"`((?:on|register)_[a-z_]+)\(", DOC.read_text(encoding="utf-8")))
    assert documented <= set(_specs()), documented - set(_specs())


def test_every_hook_has_a_one_line_docstring_and_types():
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if hasattr(fn, "middle_agent_spec"):
            assert fn.__doc__ and "\n" not in fn.__doc__.strip(), name
            assert all(p.annotation is not inspect.Parameter.empty
                       for p in inspect.signature(fn).parameters.values()), name


def test_every_public_member_of_the_backend_base_is_documented():
    from orchestrator.plugin_api import MemoryBackend

    text = DOC.read_text(encoding="utf-8")
    members = [m for m in vars(MemoryBackend) if not m.startswith("_") or m == "__init__"]
    members += ["store_dir", "options", "llm"]  # set by __init__
    missing = [m for m in members if f"`{m}`" not in text and f"`{m}(" not in text]
    assert not missing, f"docs/plugins.md does not document MemoryBackend members {missing}"


def test_every_name_plugin_api_exports_is_importable_and_the_worker_parts_are_documented():
    import orchestrator.plugin_api as api

    for name in api.__all__:
        assert getattr(api, name) is not None, name
    text = DOC.read_text(encoding="utf-8")
    for name in ("Worker", "TurnResult", "TurnRecord", "EventCallback", "WorkerError"):
        assert name in api.__all__ and f"`{name}`" in text, name
