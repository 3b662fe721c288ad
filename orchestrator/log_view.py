"""`middle log`: every run and turn of a ticket, read back from the execution log."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape


def _short(text: str | None, full: bool, limit: int = 600) -> str:
    text = (text or "").strip()
    if full or len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit} more chars; --full shows all)"


def _block(console: Console, label: str, text: str | None, full: bool) -> None:
    body = _short(text, full) or "(none)"
    console.print(f"    [bold]{label}:[/]")
    for line in body.splitlines() or [""]:
        console.print("      " + escape(line), soft_wrap=True)


def print_log(console: Console, store: Any, ticket_id: str, *, full: bool = False) -> None:
    ticket = store.get_ticket(ticket_id)
    status = getattr(ticket.status, "value", ticket.status)
    console.print(f"[bold]ticket {escape(ticket.id)}[/]: {escape(ticket.title)} " + escape(f"[{status}]"))
    if ticket.status_reason:
        console.print(f"  {escape(ticket.status_reason)}", soft_wrap=True)
    runs = store.list_runs(ticket_id)
    if not runs:
        console.print("  (never run)")
    for run in runs:
        cost = store.total_cost(run["id"])
        console.print(f"\n[bold]run {run['id']}[/] {run['status']} started {run.get('started_at')} "
                      f"cost ${cost:.4f}" + (f" — {escape(run['reason'])}" if run.get("reason") else ""),
                      soft_wrap=True)
        if run.get("plan_prompt") is not None:
            console.print("  [bold]plan[/]")
            _block(console, "memories invoked", run.get("plan_memories"), full)
        for turn in store.list_turns(run_id=run["id"]):
            secs = (turn.get("duration_ms") or 0) / 1000
            console.print(f"  [bold]turn {turn['turn_no']}[/] " + escape(f"[{turn['status']}]") + " "
                          f"${turn.get('cost_usd') or 0:.4f} {secs:.1f}s session {turn.get('session_id')}")
            _block(console, "prompt to Claude Code", turn.get("prompt"), full)
            _block(console, "Claude Code response", turn.get("response"), full)
            if turn.get("error"):
                _block(console, "error", turn["error"], full)
            if turn.get("decision") is not None or turn.get("memories_invoked"):
                _block(console, "memories invoked", turn.get("memories_invoked"), full)
                _block(console, "decision", json.dumps(turn.get("decision"), ensure_ascii=False), full)
    docs = store.memory_docs(ticket_id, include_deleted=True)
    if docs:
        console.print("\n[bold]indexed to memory[/]")
        for doc in docs:
            console.print("  " + escape(_short(doc, full)), soft_wrap=True)
