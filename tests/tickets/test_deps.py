"""depends_on: parsed from front matter, checked (unknown ids, cycles), ordered, and waited for."""

from __future__ import annotations

from pathlib import Path

from tickets.deps import check_dependencies, dependents, run_order, waiting_for
from tickets.model import Ticket
from tickets.source import load_tickets


def t(tid: str, *deps: str, tmp: Path = Path("/tmp")) -> Ticket:
    return Ticket(id=tid, project_id="p", title=tid, project_path=str(tmp), depends_on=list(deps),
                  source=f"/tickets/{tid}.md")


def test_front_matter_depends_on_and_unknown_keys(tmp_path):
    (tmp_path / "a.md").write_text("---\ntitle: A\nproject: p\ndepends_on: b\n---\nx\n")
    (tmp_path / "b.md").write_text("---\ntitle: B\nproject: p\ndepends_on: [c, c]\nlabels: [x]\n---\n")
    (tmp_path / "c.md").write_text("---\ntitle: C\nproject: p\npth: ../repo\n---\n")
    (tmp_path / "d.md").write_text("---\ntitle: D\nproject: p\ndepends_on: {x: 1}\n---\n")
    result = load_tickets(tmp_path, tmp_path)
    deps = {x.id: x.depends_on for x in result.tickets}
    assert deps == {"a": ["b"], "b": ["c"], "c": []}
    assert [(Path(w.path).name, "'pth'" in w.message) for w in result.warnings] == [("c.md", True)]
    assert len(result.errors) == 1 and "d.md" in result.errors[0].path
    assert "depends_on' must be a ticket id or a list" in result.errors[0].message


def test_unknown_ids_and_cycles_name_the_files():
    problems = check_dependencies([t("a", "b"), t("b", "a"), t("c", "zz"), t("d", "d"), t("e", "a")])
    text = [str(p) for p in problems]
    assert any("/tickets/c.md" in s and "'zz'" in s for s in text)
    assert any("/tickets/d.md" in s and "depends on itself" in s for s in text)
    cycle = [p for p in problems if "cycle" in p.message]
    assert len(cycle) == 1 and set(cycle[0].ticket_ids) == {"a", "b"}
    assert "/tickets/a.md" in str(cycle[0]) and "/tickets/b.md" in str(cycle[0])
    assert not any("e" in p.ticket_ids for p in problems)  # waits on a cycle, but is not in one


def test_known_ids_from_the_store_count():
    assert check_dependencies([t("a", "old")], known_ids={"old"}) == []


def test_run_order_puts_dependencies_first():
    order = [x.id for x in run_order([t("c", "b"), t("b", "a"), t("a"), t("d")])]
    assert order == ["a", "b", "c", "d"]


def test_waiting_for_by_mode():
    ticket = t("b", "a", "x")
    statuses = {"a": "complete", "x": "merged"}
    assert waiting_for(ticket, statuses.get, "merged") == ["a to be merged"]
    assert waiting_for(ticket, statuses.get, "complete") == []
    assert waiting_for(t("b", "gone"), statuses.get) == ["gone (no such ticket)"]
    assert waiting_for(t("b", "a"), {"a": "failed"}.get) == ["a (failed)"]


def test_dependents_are_the_tickets_that_name_it():
    tickets = [t("a"), t("b", "a"), t("c", "b"), t("d", "x", "a")]
    assert dependents(tickets, "a") == ["b", "d"]  # direct ones only, in the given order
    assert dependents(tickets, "d") == []
