"""Backend-internal modules import one way (issue: the house): hindsight's helpers take the
parts they use (parts.HindsightParts), not the backend that imports them, and the embedder
interface and its token states share their vector helpers from a module below both. Imports
under TYPE_CHECKING count: a type-only circle still ties the two modules together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported(module: Path) -> set[str]:
    """The sibling modules a module imports (`from .x import ...`, `from . import x`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
    return names


def circles(folder: Path) -> list[tuple[str, ...]]:
    graph = {p.stem: imported(p) for p in folder.glob("*.py")}
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


def test_the_circle_finder_finds_one(tmp_path):
    (tmp_path / "a.py").write_text("from .b import x\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from .a import y\n")
    assert circles(tmp_path) == [("a", "b")]
