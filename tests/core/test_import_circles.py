"""Backend-internal modules import one way (issue: the house): hindsight's helpers take the
parts they use (parts.HindsightParts), not the backend that imports them, and the embedder
interface and its token states share their vector helpers from a module below both. Imports
under TYPE_CHECKING count: a type-only circle still ties the two modules together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported(module: Path, package: str = "") -> set[str]:
    """The sibling modules a module imports (`from .x import ...`, `from . import x`, and with
    `package` its absolute forms: `from package.x import ...`, `import package.x`)."""
    names: set[str] = set()
    prefix = package + "." if package else None
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
        elif prefix and isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith(prefix):
                names.add(node.module[len(prefix):].split(".")[0])
            elif node.module == package:
                names.update(alias.name for alias in node.names)
        elif prefix and isinstance(node, ast.Import):
            names.update(a.name[len(prefix):].split(".")[0] for a in node.names if a.name.startswith(prefix))
    return names


def circles(folder: Path, package: str = "") -> list[tuple[str, ...]]:
    graph = {p.stem: imported(p, package) for p in folder.glob("*.py")}
    found = []

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                found.append(tuple(path))
            elif nxt not in path and nxt in graph and nxt > path[0]:
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return found


@pytest.mark.parametrize("folder", ["backends/hindsight", "backends/retrieval/embedders"])
def test_no_import_circles_inside_the_backend(folder):
    assert circles(ROOT / folder) == []


def test_no_import_circles_inside_the_memory_package():
    """memory.curation names what it needs of the facade (CuratedMemory) instead of importing
    memory.facade, which imports it (issue 38: the only circle in the tree)."""
    assert circles(ROOT / "orchestrator" / "memory", "orchestrator.memory") == []


def test_the_circle_finder_finds_one(tmp_path):
    (tmp_path / "a.py").write_text("from .b import x\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from .a import y\n")
    assert circles(tmp_path) == [("a", "b")]


def test_the_circle_finder_finds_one_through_absolute_imports(tmp_path):
    (tmp_path / "a.py").write_text("from pkg.b import x\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    import pkg.a\n")
    assert circles(tmp_path, "pkg") == [("a", "b")]
