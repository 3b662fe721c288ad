"""Enumerate, don't sample: every method of `tickets/` that writes the store (runs INSERT, UPDATE
or DELETE) is named in docs/runs.md's table of writes, with the kill point that covers it or why
none is needed, and every kill point is in one of its tables. A new write without a row fails
here, so the kill-point audit is done again for it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from orchestrator.killpoints import POINTS

ROOT = Path(__file__).resolve().parents[2]
WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE)\b")


def _writers() -> dict[str, str]:
    """{function name: where} for each function of tickets/ whose own text writes (a migration's
    steps aside: they run once, inside the store's opening)."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tickets").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_migrat"):
                continue
            if WRITES.search(ast.get_source_segment(text, node) or ""):
                found.setdefault(node.name, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _table() -> str:
    doc = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    start = doc.index("### Every write, and the point that covers it")
    return doc[start:doc.index("\n**", start)]


def test_every_store_write_is_in_the_table_of_writes():
    named = set(re.findall(r"`([a-z_]+)`", _table()))
    writers = _writers()
    assert len(writers) > 20  # the scan finds them (a broken scan would pass with none)
    missing = {name: where for name, where in writers.items() if name not in named}
    assert not missing, f"store writes with no row in docs/runs.md's table of writes: {missing}"


def test_every_kill_point_is_in_a_table_of_docs_runs():
    doc = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    assert not [p.name for p in POINTS if f"| `{p.name}` |" not in doc]
