"""How `middle memory show` and `middle memory history` print a doc and its changes."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from orchestrator.cli.output import hanging, safe
from orchestrator.memory.curation import describe_change, origin_line
from orchestrator.memory.format import DOC_ID_CHARS


def print_doc(console: Console, shown: dict[str, Any]) -> None:
    console.print(f"[bold]doc {shown['short_id']}[/] ({shown['id']})")
    console.print(hanging("  from: ", origin_line(shown)))
    if shown["pinned"]:
        console.print("  pinned: always in the agent's memories")
    if shown.get("validity"):
        console.print(f"  {shown['validity']}" + (": out of recall" if shown["validity"].startswith("expired")
                                                  else ""))
    if shown["superseded_by"]:
        new = shown["superseded_by"]
        console.print(hanging("  superseded by: ", f"{new['id'][:DOC_ID_CHARS]} ({(new['at'] or '')[:19]}): "
                              f"{new['doc']}"))
    for old in shown["supersedes"]:
        console.print(hanging("  supersedes: ", f"{old['id'][:DOC_ID_CHARS]}: {old['doc']}"))
    console.print("  text:")
    console.print(hanging("    ", shown["doc"]))
    if shown["changes"]:
        console.print("  changes:")
        print_changes(console, shown["changes"], indent="    ")


def print_changes(console: Console, changes: list[dict[str, Any]], indent: str = "") -> None:
    if not changes:
        console.print(f"{indent}(no changes)")
    for change in changes:
        undone = f" [undone by {change['undone_by']}]" if change.get("undone_by") else ""
        console.print(indent + safe(f"{change['id']:>4}  {change['at'][:19]}  {change['who']}  "
                                    f"{describe_change(change)}{undone}"), soft_wrap=True)
