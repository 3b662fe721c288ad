"""How `middle memory show`, `history` and `stats` print a doc, its changes and the numbers."""

from __future__ import annotations

import difflib
from typing import Any, Mapping

from rich.console import Console

from orchestrator.cli.output import hanging, safe
from orchestrator.memory.curation import describe_change, origin_line
from orchestrator.memory.format import DOC_ID_CHARS


def print_doc(console: Console, shown: dict[str, Any], ids: Mapping[str, str] | None = None) -> None:
    """A doc as `middle memory show` prints it (`ids`: its changes' docs, see describe_change)."""
    console.print(f"[bold]doc {shown['short_id']}[/] ({shown['id']})")
    console.print(hanging("  from: ", origin_line(shown)))
    if shown["pinned"]:
        console.print("  pinned: always in the agent's memories")
    if shown.get("validity"):
        console.print(f"  {shown['validity']}" + (": out of recall" if shown["validity"].startswith("expired")
                                                  else ""))
    if shown["superseded_by"]:
        new = shown["superseded_by"]
        ident = new.get("short_id") or new["id"][:DOC_ID_CHARS]
        console.print(hanging("  superseded by: ", f"{ident} ({(new['at'] or '')[:19]}): {new['doc']}"))
    for old in shown["supersedes"]:
        console.print(hanging("  supersedes: ", f"{old.get('short_id') or old['id'][:DOC_ID_CHARS]}: {old['doc']}"))
    if shown.get("uses"):
        uses = shown["uses"]
        console.print(f"  usage: recalled in {uses['recalled']} run(s), used in {uses['used']}")
    console.print("  text:")
    console.print(hanging("    ", shown["doc"]))
    if shown["changes"]:
        console.print("  changes:")
        print_changes(console, shown["changes"], indent="    ", ids=ids)


def print_changes(console: Console, changes: list[dict[str, Any]], indent: str = "",
                  full: bool = False, ids: Mapping[str, str] | None = None) -> None:
    """One line per change (`ids`: see describe_change); `full`: then its whole before and
    after (an edit as a diff)."""
    if not changes:
        console.print(f"{indent}(no changes)")
    for change in changes:
        undone = f" [undone by {change['undone_by']}]" if change.get("undone_by") else ""
        console.print(indent + safe(f"{change['id']:>4}  {change['at'][:19]}  {change['who']}  "
                                    f"{describe_change(change, ids)}{undone}"), soft_wrap=True)
        if full:
            for line in full_change(change):
                console.print(indent + "      " + safe(line), soft_wrap=True, highlight=False)


def full_change(change: dict[str, Any]) -> list[str]:
    """A change's whole before and after: an edit (or an undone edit) as a unified diff of the
    texts, line by line; a doc added, written to supersede, or deleted, in full."""
    before, after = change.get("before") or {}, change.get("after") or {}
    old, new = before.get("doc"), after.get("doc")
    if isinstance(old, str) and isinstance(new, str):
        return list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after",
                                         lineterm="", n=3)) or ["(same text)"]
    text = new if isinstance(new, str) else old
    if isinstance(text, str):
        return [("after: " if text is new else "before: ") + line for line in text.splitlines() or [""]]
    return []


def print_stats(console: Console, numbers: dict[str, Any]) -> None:
    console.print(f"project {numbers['project']}, backend {numbers['backend']}: {numbers['docs']:,} doc(s)")
    sources = ", ".join(f"{kind} {n:,}" for kind, n in numbers["by_source"].items() if n)
    console.print(f"  by source: {sources or 'none'}")
    console.print(f"  pinned {numbers['pinned']:,}, superseded {numbers['superseded']:,}")
    share = f" ({100 * numbers['uses'] / numbers['recalls']:.0f}% of recalls)" if numbers["recalls"] else ""
    console.print(f"  recalled: {numbers['recalled_docs']:,} doc(s) in {numbers['recalls']:,} recall(s); "
                  f"used: {numbers['used_docs']:,} doc(s), {numbers['uses']:,} time(s){share}")
    candidates = numbers["candidates"]
    console.print(f"  candidates to supersede or forget (recalled in 3+ runs, never used): {len(candidates)}")
    for c in candidates:
        console.print(hanging(f"    {c['id']}  recalled {c['uses']['recalled']}: ", c["text"]))
