"""Terminal output for the CLI: consoles, safe text (no terminal control codes), tables, reports."""

from __future__ import annotations

import re
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Piped to a file, rich would hard-wrap at 80 columns; a wide console keeps one line a line.
    width = None if stream.isatty() else 10_000
    return Console(stderr=stderr, highlight=False, width=width, soft_wrap=True)


console = _console()
err_console = _console(stderr=True)

# C0/C1 control characters except tab and newline: stored text (a ticket, a memory, Claude Code's
# output) must not be able to move the cursor, recolour or retitle the user's terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: Any) -> str:
    """Text made safe to print: control characters shown as \\xNN, rich markup escaped."""
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text)))


def hanging(prefix: str, text: str) -> str:
    """`prefix` then `text`, its continuation lines indented to where its first line starts (a
    multi-line memory stays under its id or score, not at the left edge like a new entry).
    `prefix` is plain text (no markup); the result is safe to print."""
    pad = "\n" + " " * len(prefix)
    return safe(prefix) + pad.join(safe(line) for line in str(text).split("\n"))


def print_each(target: Console, label: str, items: Any) -> None:
    """One line per item, `label` (Rich markup allowed) before the item's escaped text."""
    for item in items:
        target.print(f"{label} {safe(item)}")


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, ending with an ellipsis when cut."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def make_table(*names: str) -> Table:
    """A table whose first column never wraps; long cells are cut with an ellipsis."""
    table = Table()
    for i, name in enumerate(names):
        table.add_column(name, overflow="ellipsis" if i else "fold", no_wrap=i == 0)
    return table


def say(msg: str) -> None:
    console.print(f"  [dim]·[/] {safe(msg)}")


def on_event(event: dict[str, Any]) -> None:
    """Stream Claude Code's progress: its tool calls and the first line of its text."""
    kind = event.get("type")
    if kind == "tool_use":
        inp = event.get("input") or {}
        target = inp.get("file_path") or inp.get("command") or inp.get("pattern") or ""
        console.print(f"    [cyan]▸ {safe(event.get('name'))}[/] {safe(str(target)[:100])}")
    elif kind == "text" and event.get("text", "").strip():
        console.print(f"    [dim]{safe(event['text'].strip().splitlines()[0][:120])}[/]")


OFFLINE_COST = "offline model, no cost"  # what a run on the fake model cost (its dollars are made up)


def report(outcome: Any, prefix: str = "") -> None:
    """The result line of one ticket's run; `prefix`: what every line of a piped batch starts with."""
    color = {"complete": "green", "failed": "red", "skipped": "yellow"}.get(outcome.status, "yellow")
    # pending: never started, left in the backlog; stored: feedback kept for the run that holds
    # the ticket (no run of this process, so no turns and no cost to show, not even "$0.0000").
    if outcome.status in ("skipped", "pending", "stored"):
        console.print(f"{prefix}[bold {color}]{outcome.status}[/] ticket {safe(outcome.ticket_id)}: "
                      f"{safe(outcome.reason)}")
        return
    line = (f"{prefix}[bold {color}]{outcome.status}[/] ticket {safe(outcome.ticket_id)}: "
            f"{outcome.turns} turn(s), {OFFLINE_COST if outcome.offline else f'${outcome.cost_usd:.4f}'}")
    if outcome.corrections:
        line += f", {outcome.corrections} correction(s) after a failed check"
    if outcome.reason:
        line += f" — {safe(outcome.reason)}"
    console.print(line)


def summary_line(outcomes: list[Any]) -> str:
    """`middle run`'s last line: tickets complete / failed (/ skipped / interrupted / still pending,
    when any), turns, cost. Each ticket is counted by the status it was left in."""
    counts = {s: sum(o.status == s for o in outcomes)
              for s in ("complete", "failed", "skipped", "interrupted", "lost", "pending")}
    turns = sum(o.turns for o in outcomes)
    cost = sum(o.cost_usd for o in outcomes if not o.offline)
    parts = [f"{counts['complete']} complete", f"{counts['failed']} failed"]
    names = {"pending": "still pending", "lost": "taken over by another runner"}
    parts += [f"{counts[s]} {names.get(s, s)}" for s in ("skipped", "interrupted", "lost", "pending") if counts[s]]
    offline = any(o.offline for o in outcomes)
    spent = OFFLINE_COST if offline and not cost else f"${cost:.4f}" + (" (+ offline runs)" if offline else "")
    corrections = sum(o.corrections for o in outcomes)
    fixed = f", {corrections} correction(s)" if corrections else ""
    return f"{len(outcomes)} ticket(s): {', '.join(parts)}; {turns} turn(s){fixed}, {spent}"
