"""Enumerate, don't sample: every method of `tickets/` that writes the store (runs INSERT, UPDATE
or DELETE) is named in docs/runs.md's table of writes, with the kill point that covers it or why
none is needed, and every kill point is in one of its tables. A new write without a row fails
here, so the kill-point audit is done again for it.

What counts as a function's write: an INSERT, UPDATE or DELETE word in its text, an SQL write
statement in any of its strings (any case, an f-string's too), or a module-level constant it
names that holds one. A writer's name must be its own (one that other files' writers share is
listed below, so a new writer cannot hide behind an audited one's row), and no code outside
`tickets/` writes the ticket store's tables. `test_the_audit_finds_every_kind_of_new_write`
proves the scan sees each kind of write on a package made for it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from orchestrator.killpoints import POINTS

ROOT = Path(__file__).resolve().parents[2]
WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE)\b")
# An SQL statement that writes, as code holds it in a string (any case; `{table}` of an f-string)
SQL_WRITE = re.compile(r"\b(?:INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\S+)|UPDATE\s+(\S+)\s+SET\b|DELETE\s+FROM\s+(\S+))",
                       re.I)
# Writer names defined in more than one file of tickets/, each file's one audited under the
# table's row of that name (the claim's write, shared by the claim, the queue and a round's claim)
SHARED_NAMES = {"_put_claim": {"tickets/claims.py", "tickets/queue.py", "tickets/rounds.py"}}
# Code outside tickets/ that may write the ticket store's tables: a benchmark seeding its own store
OUTSIDE_ALLOWED = {"orchestrator/bench/fleet.py"}


def _strings(node: ast.AST, docstring: ast.AST | None = None) -> list[str]:
    """The string literals of `node`'s code (an f-string as written), its docstring aside."""
    found = []
    for sub in ast.walk(node):
        if sub is docstring:
            continue
        if isinstance(sub, ast.JoinedStr):
            found.append(ast.unparse(sub))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            found.append(sub.value)
    return found


def _docstring(node: ast.AST) -> ast.AST | None:
    body = getattr(node, "body", None)
    first = body[0] if isinstance(body, list) and body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.value
    return None


def _writing_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound to a value whose strings hold an SQL write."""
    names: set[str] = set()
    for stmt in tree.body:
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
        value = getattr(stmt, "value", None)
        if value is not None and any(SQL_WRITE.search(s) for s in _strings(value)):
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def writers(root: Path) -> dict[str, list[str]]:
    """{function name: [where, ...]} for each function of `root`/tickets/ that writes (a
    migration's steps aside: they run once, inside the store's opening)."""
    found: dict[str, list[str]] = {}
    for path in sorted((root / "tickets").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        constants = _writing_constants(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_migrat"):
                continue
            named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if (WRITES.search(ast.get_source_segment(text, node) or "")
                    or any(SQL_WRITE.search(s) for s in _strings(node, _docstring(node)))
                    or named & constants):
                found.setdefault(node.name, []).append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return found


def _table() -> str:
    doc = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    start = doc.index("### Every write, and the point that covers it")
    return doc[start:doc.index("\n**", start)]


def _unlisted(found: dict[str, list[str]]) -> dict[str, list[str]]:
    named = set(re.findall(r"`([a-z_]+)`", _table()))
    return {name: where for name, where in found.items() if name not in named}


def _shared(found: dict[str, list[str]]) -> dict[str, set[str]]:
    """Writer names defined in several files, with their files, where SHARED_NAMES does not list them so."""
    files = {name: {where.split(":")[0] for where in places} for name, places in found.items()}
    return {name: have for name, have in files.items() if len(have) > 1 and have != SHARED_NAMES.get(name)}


def ticket_tables(root: Path) -> set[str]:
    return {table for path in (root / "tickets").rglob("*.py")
            for table in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", path.read_text(encoding="utf-8"))}


def outside_writes(root: Path, tables: set[str]) -> list[str]:
    """SQL writes of the ticket store's tables in code outside tickets/ (docstrings aside)."""
    hits = []
    for top in ("orchestrator", "backends", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            if where in OUTSIDE_ALLOWED or ".venv" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(d) for n in ast.walk(tree) if (d := _docstring(n)) is not None}
            for string in (s for n in ast.walk(tree) if isinstance(n, ast.Constant | ast.JoinedStr)
                           and id(n) not in docstrings for s in _strings(n)):
                hits += [f"{where}: {m.group(0)}" for m in SQL_WRITE.finditer(string)
                         if next(t for t in m.groups() if t).strip('"') in tables]
    return hits


def test_every_store_write_is_in_the_table_of_writes():
    found = writers(ROOT)
    assert len(found) > 20  # the scan finds them (a broken scan would pass with none)
    missing = _unlisted(found)
    assert not missing, f"store writes with no row in docs/runs.md's table of writes: {missing}"


def test_a_writers_name_is_its_own():
    assert not (shared := _shared(writers(ROOT))), (
        f"store writes defined under one name in several files (a new one would pass under the audited "
        f"one's row): give it a name of its own and a row, or list it in SHARED_NAMES: {shared}")


def test_no_code_outside_tickets_writes_the_ticket_stores_tables():
    tables = ticket_tables(ROOT)
    assert {"runs", "turns", "end_hooks"} <= tables
    assert not (hits := outside_writes(ROOT, tables)), f"write the ticket store through tickets/ (audited): {hits}"


NEW_WRITES = '''
"""A module made by the test: each function writes the store in another way."""
_MARK = "UPDATE runs SET flag = 1 WHERE id = ?"


class NewRecord:
    def plain_write(self, conn):
        """Stores a flag."""
        conn.execute("INSERT INTO flags (run_id) VALUES (?)", ("r",))

    def lower_case_write(self, conn):
        conn.execute("delete from flags where run_id = ?", ("r",))

    def through_a_constant(self, conn):
        conn.execute(_MARK, ("r",))

    def f_string_write(self, conn, table):
        conn.execute(f"update {table} set flag = 0")

    async def async_write(self, conn):
        conn.execute("insert or replace into flags values (?)", ("r",))

    def _put_claim(self, conn):  # an audited writer's name, in a new file
        conn.execute("UPDATE claims SET lease_until = NULL")

    def reads_only(self, conn):
        """Says what an update would do, and writes nothing."""
        return conn.execute("SELECT 1 FROM runs").fetchall()
'''
OUTSIDE = '''
def sneak(conn):
    """Not through tickets/: an UPDATE runs here would escape the audit."""
    conn.execute("UPDATE runs SET status = 'complete'")
'''


def test_the_audit_finds_every_kind_of_new_write(tmp_path):
    (tmp_path / "tickets").mkdir()
    (tmp_path / "tickets" / "new_record.py").write_text(NEW_WRITES, encoding="utf-8")
    for top in ("orchestrator", "backends", "plugins"):
        (tmp_path / top).mkdir()
    (tmp_path / "orchestrator" / "sneak.py").write_text(OUTSIDE, encoding="utf-8")
    found = writers(tmp_path)
    new = {"plain_write", "lower_case_write", "through_a_constant", "f_string_write", "async_write"}
    assert set(found) == new | {"_put_claim"}, found
    assert set(_unlisted(found)) == new  # each would fail test_every_store_write_is_in_the_table_of_writes
    assert _shared({**writers(ROOT), "_put_claim": [*writers(ROOT)["_put_claim"], *found["_put_claim"]]})
    assert outside_writes(tmp_path, {"runs"}) == ["orchestrator/sneak.py: UPDATE runs SET"]


def test_every_kill_point_is_in_a_table_of_docs_runs():
    doc = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    assert not [p.name for p in POINTS if f"| `{p.name}` |" not in doc]
