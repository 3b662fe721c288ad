"""Ticket dependencies (`depends_on`): unknown ids, cycles, run order, and what a ticket waits for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Literal

from tickets.model import Ticket

Mode = Literal["merged", "complete"]

# The dependency statuses that let a dependent start, per `[run] dependencies`.
SATISFIED: dict[str, frozenset[str]] = {
    "merged": frozenset({"merged"}),
    "complete": frozenset({"complete", "merged"}),
}


@dataclass(frozen=True)
class DependencyProblem:
    """Tickets that can never start as written: an unknown id or a cycle. `files` name them."""

    ticket_ids: tuple[str, ...]
    files: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{', '.join(self.files)}: {self.message}"


def _where(ticket: Ticket) -> str:
    return ticket.source or f"ticket {ticket.id}"


def check_dependencies(tickets: Iterable[Ticket], known_ids: Iterable[str] = ()) -> list[DependencyProblem]:
    """Problems in the tickets' `depends_on`: ids that name no ticket, and cycles (each once)."""
    by_id = {t.id: t for t in tickets}
    known = set(known_ids) | set(by_id)
    problems: list[DependencyProblem] = []
    for t in by_id.values():
        unknown = [d for d in t.depends_on if d not in known]
        if t.id in t.depends_on:
            problems.append(DependencyProblem((t.id,), (_where(t),),
                            f"ticket {t.id!r} depends on itself: remove it from depends_on"))
        if unknown:
            problems.append(DependencyProblem(
                (t.id,), (_where(t),),
                f"depends_on names no ticket: {', '.join(map(repr, unknown))} (fix the id, or add "
                "that ticket to the ticket folder)"))
    seen_cycles: set[frozenset[str]] = set()
    for cycle in _cycles(by_id):
        key = frozenset(cycle)
        if key in seen_cycles or len(cycle) < 2:
            continue
        seen_cycles.add(key)
        path = " → ".join([*cycle, cycle[0]])
        problems.append(DependencyProblem(
            tuple(cycle), tuple(_where(by_id[c]) for c in cycle),
            f"depends_on forms a cycle ({path}), so none of them can start: remove one of those "
            "dependencies"))
    return problems


def _cycles(by_id: dict[str, Ticket]) -> list[list[str]]:
    """One cycle per strongly connected group of tickets (iterative DFS, stable order)."""
    white, grey, black = 0, 1, 2
    color = {tid: white for tid in by_id}
    cycles: list[list[str]] = []
    for root in by_id:
        if color[root] != white:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            node, index = stack.pop()
            if index == 0:
                color[node] = grey
                path.append(node)
            deps = [d for d in by_id[node].depends_on if d in by_id]
            if index < len(deps):
                stack.append((node, index + 1))
                nxt = deps[index]
                if color[nxt] == white:
                    stack.append((nxt, 0))
                elif color[nxt] == grey and nxt != node:
                    cycles.append(path[path.index(nxt):])
            else:
                color[node] = black
                path.pop()
    return cycles


def run_order(tickets: list[Ticket]) -> list[Ticket]:
    """The tickets with every dependency before its dependents (otherwise in the given order)."""
    by_id = {t.id: t for t in tickets}
    placed: set[str] = set()
    order: list[Ticket] = []

    def place(t: Ticket, trail: frozenset[str]) -> None:
        if t.id in placed or t.id in trail:  # a cycle is reported by check_dependencies
            return
        for dep in t.depends_on:
            if dep in by_id:
                place(by_id[dep], trail | {t.id})
        placed.add(t.id)
        order.append(t)

    for t in tickets:
        place(t, frozenset())
    return order


def dependents(tickets: Iterable[Ticket], ticket_id: str) -> list[str]:
    """The ids of the tickets whose `depends_on` names `ticket_id`, in the given order."""
    return [t.id for t in tickets if ticket_id in t.depends_on]


def waiting_for(ticket: Ticket, status_of: Callable[[str], str | None], mode: Mode = "merged") -> list[str]:
    """What the ticket still waits for, one phrase per unmet dependency ([] when it may start)."""
    waits = []
    for dep in ticket.depends_on:
        status = status_of(dep)
        if status in SATISFIED[mode]:
            continue
        if status is None:
            waits.append(f"{dep} (no such ticket)")
        elif status == "complete":
            waits.append(f"{dep} to be merged")
        else:
            waits.append(f"{dep} ({status})")
    return waits
