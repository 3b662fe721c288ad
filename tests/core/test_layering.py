"""Layering is enforced, not hoped for: import-linter runs the contracts in pyproject.toml."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_the_contracts_can_fail(tmp_path):
    # A copy of the tickets package that imports orchestrator must break the first contract.
    pkg = tmp_path / "tickets"
    shutil.copytree(ROOT / "tickets", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "leak.py").write_text("from orchestrator.running.orchestrator import Orchestrator\n")
    cfg = tmp_path / ".importlinter"
    cfg.write_text("[importlinter]\nroot_packages =\n    tickets\n    orchestrator\n\n"
                   "[importlinter:contract:1]\nname = t\ntype = forbidden\n"
                   "source_modules = tickets\nforbidden_modules = orchestrator\n")
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    env_path = f"{tmp_path}:{ROOT}"
    result = subprocess.run([exe, "--no-cache", "--config", str(cfg)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0 and "tickets.leak -> orchestrator.running.orchestrator" in result.stdout, (
        result.stdout
    )


def test_the_plugin_api_pulls_in_no_cli_server_or_heavy_library():
    import subprocess
    import sys

    code = (
        "import sys, orchestrator.plugin_api; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'numpy', 'faiss', 'scipy', 'langgraph', 'anthropic') "
        "or m in ('orchestrator.cli.main', 'orchestrator.cli.memory', 'orchestrator.server')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_middle_help_with_a_plugin_that_adds_a_subcommand_loads_no_config_or_memory(tmp_path):
    """The keyword plugin adds `middle memory keywords`: registering it loads the memory command
    group, which must not pull in the pydantic config, the memory facade or a backend library."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("middle_agent_keyword_memory", reason="install plugins/middle-agent-keyword-memory")
    code = (
        "import sys\n"
        "from orchestrator.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('orchestrator.config.settings', 'orchestrator.memory.facade', 'numpy', 'langgraph') "
        "if m in sys.modules), 'middle_agent_keyword_memory.plugin' in sys.modules, file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={k: v for k, v in __import__("os").environ.items() if k != "MIDDLE_LOAD_PLUGINS"},
    )
    assert result.stderr.strip().splitlines()[-1] == "[] True", result.stderr


# --- circles and imports by name ------------------------------------------------------------

# Circles another piece of work removes; delete an entry once its work is merged (a circle must
# stay inside its entry's modules to be excused).
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()  # none left: a new circle fails this test


def _circles(imports: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan), or of one that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in imports.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == module:
                    break
            if len(component) > 1 or module in imports.get(module, ()):
                found.append(component)

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_the_import_graph_has_no_circle():
    # Every import counts, including those inside functions (a lazy import is still a
    # dependency), but not those under `if TYPE_CHECKING:`, which never run.
    import grimp

    graph = grimp.build_graph("orchestrator", "tickets", "backends", exclude_type_checking_imports=True, cache_dir=None)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    circles = [c for c in _circles(imports) if not any(c <= known for known in KNOWN_CIRCLES)]
    assert not circles, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in sorted(circles, key=sorted))


def test_circles_are_found():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _circles({"a": {"a"}}) == [{"a"}] and _circles({"a": {"b"}, "b": set()}) == []


def _backend_roots() -> tuple[str, ...]:
    import tomllib

    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    return tuple(r for r in roots if r not in ("orchestrator", "tickets"))


_DYNAMIC = ("import_module", "__import__")


def imports_by_name(source: str, roots: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    """Modules under `roots` that source imports by name (import_module, __import__), besides `allowed`.

    In a file that imports by name, every string naming such a module counts (it may reach
    import_module through a variable); an f-string counts by its constant start.
    """
    import ast

    tree = ast.parse(source)
    dynamic = any(
        isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC)
            or (isinstance(node.func, ast.Attribute) and node.func.attr in _DYNAMIC)
        )
        for node in ast.walk(tree)
    )
    if not dynamic:
        return []
    found = []
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if id(node) in parts:  # an f-string's pieces: the f-string counts once, below
            continue
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = str(node.values[0].value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        name = text.split(":")[0]
        if (
            name.split(".")[0] in roots
            and name not in allowed
            and all(part.isidentifier() for part in name.rstrip(".").split("."))
        ):
            found.append(text)
    return found


def test_the_core_imports_no_backend_or_plugin_by_name():
    """Import-linter sees only import statements: `importlib.import_module("backends.x")` in the
    core would name a backend unseen. Only the built-in plugins (DEFAULT_PLUGINS) load by name."""
    from orchestrator.plugins.manager import DEFAULT_PLUGINS

    roots = _backend_roots()
    found = {
        str(path.relative_to(ROOT)): names
        for package in ("orchestrator", "tickets")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (names := imports_by_name(path.read_text(encoding="utf-8"), roots, DEFAULT_PLUGINS))
    }
    assert found == {}, f"the core imports backends or plugins by name: {found}"


def test_an_import_by_name_of_a_backend_is_caught():
    roots, allowed = ("backends", "middle_agent_keyword_memory"), ("backends.bm25.plugin",)
    assert imports_by_name('import importlib\nimportlib.import_module("backends.retrieval")\n', roots, allowed) == [
        "backends.retrieval"
    ]
    assert imports_by_name(
        'from importlib import import_module as im\nM = "middle_agent_keyword_memory.plugin"\n'
        "def f():\n    return __import__(M)\n",
        roots,
        allowed,
    ) == ["middle_agent_keyword_memory.plugin"]
    assert imports_by_name('import importlib\nimportlib.import_module(f"backends.{name}")\n', roots, allowed) == [
        "backends."
    ]
    assert imports_by_name('import importlib\nimportlib.import_module("backends.bm25.plugin")\n', roots, allowed) == []
    assert imports_by_name('"""Parts of backends.retrieval."""\nX = "backends.retrieval"\n', roots, allowed) == []


def _folder(module: str) -> str:
    """The room a module stands in: `orchestrator.<folder or top module>`, or its top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "orchestrator" and len(parts) > 1 else parts[0]


def test_the_folders_stand_in_layers():
    # A folder is one room of the architecture: if two folders import each other (through any
    # files, a type-only import included: it is still what a reader must know), one of them
    # imports from a layer above it. `orchestrator.plugin_api` stands on top by design.
    # grimp runs in a clean interpreter from the repository root: under pytest, `tickets` could
    # resolve to the test folder of that name.
    code = (
        "import grimp, json\n"
        "g = grimp.build_graph('orchestrator', 'tickets', 'backends', exclude_type_checking_imports=False,"
        " cache_dir=None)\n"
        "print(json.dumps([[m, i] for m in g.modules for i in g.find_modules_directly_imported_by(m)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout
    rooms: dict[str, set[str]] = {}
    for module, imported in json.loads(out):
        a, b = _folder(module), _folder(imported)
        if a != b:
            rooms.setdefault(a, set()).add(b)
    circles = _circles(rooms)
    assert not circles, "folders that import each other: " + "; ".join(
        " <-> ".join(sorted(c)) for c in sorted(circles, key=sorted)
    )
