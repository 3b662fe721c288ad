"""`middle diff | merge | discard | revert | gc`: review a ticket's change and act on it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.cli.output import console, err_console, print_each, safe


def _services(ctx: click.Context):
    from orchestrator.cli.context import get_config, services

    return services(ctx, get_config(ctx))


def _report(result) -> None:
    """The result's line (a conflict in red, whatever the ticket's status), then its warnings;
    exit 1 when it conflicts: nothing was changed and the user has something to resolve."""
    label = "conflict" if result.conflicts else result.status
    color = {"merged": "green", "conflict": "red", "reverted": "yellow", "discarded": "yellow"}.get(label, "")
    text = safe(result.message)
    console.print(f"[bold {color}]{label}[/]: {text}" if color else text)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {safe(warning)}")
    if result.conflicts:
        sys.exit(1)


@click.command()
@click.argument("ticket_id")
@click.option("--stat", is_flag=True, help="Only the changed files and line counts.")
@click.pass_context
def diff(ctx: click.Context, ticket_id: str, stat: bool) -> None:
    """Show a ticket's change: its branch against the commit it started from."""
    result = _services(ctx).review.diff(ticket_id, stat=stat)
    if not result["text"]:
        err_console.print(f"ticket {safe(ticket_id)} changed no files")
        return
    if console.is_terminal and not stat:
        from rich.syntax import Syntax

        console.print(Syntax(result["text"], "diff", theme="ansi_dark", word_wrap=False))
    else:  # piped: the plain patch, so `middle diff ID | git apply` works
        sys.stdout.write(result["text"])


@click.command()
@click.argument("ticket_id")
@click.pass_context
def merge(ctx: click.Context, ticket_id: str) -> None:
    """Merge a complete ticket's branch into the base branch (fast-forward when possible).

    A conflict leaves the base branch and your working tree as they were and marks the ticket
    `conflict`; uncommitted changes of yours in a file the merge would write stop it first.
    """
    _report(_services(ctx).review.merge(ticket_id))


@click.command()
@click.argument("ticket_id")
@click.option("--force", is_flag=True, help="Also delete files in its worktree that git does not track.")
@click.pass_context
def discard(ctx: click.Context, ticket_id: str, force: bool) -> None:
    """Drop an unmerged ticket's work: its worktree and branch, and its memory doc.

    Files in its worktree that git does not track are yours: it refuses, naming them, unless --force.
    """
    _report(_services(ctx).review.discard(ticket_id, force=force))


@click.command()
@click.argument("ticket_id")
@click.option("--done", is_flag=True, help="You undid its merge by hand: check that, mark it reverted, "
              "delete its memory doc.")
@click.option("--force", is_flag=True, help="With --done: skip the check and drop an unfinished revert's "
              "edits. Unmerged: as `discard --force`.")
@click.pass_context
def revert(ctx: click.Context, ticket_id: str, done: bool, force: bool) -> None:
    """Undo a ticket: a revert commit on the base branch if merged (else discard), memory doc deleted.

    A revert that conflicts changes nothing and waits in its own worktree with conflict markers:
    resolve and commit there, then run `middle revert ID` again to put it on the base branch.
    """
    _report(_services(ctx).review.revert(ticket_id, done=done, force=force))


@click.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be removed and what kept.")
@click.option("--force", is_flag=True, help="Also remove work middle cannot account for: uncommitted "
              "files, commits on no other branch, middle/ branches it did not create.")
@click.pass_context
def gc(ctx: click.Context, dry_run: bool, force: bool) -> None:
    """Remove worktrees and branches that no ticket needs any more (e.g. left by a crashed run).

    Work it cannot account for is kept and named, with how to remove it, unless --force.
    """
    from orchestrator.workspace.gc import collect

    svc = _services(ctx)
    store = svc.read_store()
    if store is None:
        console.print("nothing to collect: no ticket has run here yet")
        return
    repos = [Path(r) for r in store.run_repos()]
    report = collect(store, svc.review.worktrees, repos, dry_run=dry_run, force=force)
    verb = "would remove" if dry_run else "removed"
    print_each(console, f"{verb} worktree", report.worktrees)
    print_each(console, f"{verb} branch", report.branches)
    print_each(console, "would keep" if dry_run else "kept", report.kept)
    if not report.worktrees and not report.branches and not report.kept:
        console.print("nothing to collect")

