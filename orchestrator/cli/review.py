"""`middle diff | merge | discard | revert | gc`: review a ticket's change and act on it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
@click.option("--despite-check", "despite_check", metavar="REASON",
              help="Merge a ticket whose check still failed after its rounds, its work as committed on its "
              "branch, on your judgement (a flaky test, a wrong check): your reason and name are recorded.")
@click.pass_context
def merge(ctx: click.Context, ticket_id: str, despite_check: str | None) -> None:
    """Merge a complete ticket's branch into the base branch (fast-forward when possible).

    A conflict leaves the base branch and your working tree as they were and marks the ticket
    `conflict`; uncommitted changes of yours in a file the merge would write stop it first.
    """
    by = ""
    if despite_check is not None:
        from orchestrator.memory.curation import cli_user

        by = cli_user(_services(ctx).config.root)
    _report(_services(ctx).review.merge(ticket_id, despite_check=despite_check, by=by))


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
@click.option("--runs-older-than", "older_than", metavar="AGE", default=None,
              help="Also prune the run events and checkpoints of runs that ended longer ago than AGE "
              "(30d, 12h, 2w; default [store] keep_days, if set).")
@click.option("--baselines", is_flag=True, help="Also forget the checks' stored results on base commits: "
              "the next ticket from each commit measures them again.")
@click.pass_context
def gc(ctx: click.Context, dry_run: bool, force: bool, older_than: str | None, baselines: bool) -> None:
    """Remove worktrees and branches that no ticket needs any more (e.g. left by a crashed run).

    Work it cannot account for is kept and named, with how to remove it, unless --force. With
    --runs-older-than (or [store] keep_days) it also prunes what old ended runs left behind.
    With --baselines it forgets the checks' results on base commits (measured again when needed).
    """
    from orchestrator.cli.context import get_config
    from orchestrator.workspace.gc import collect
    from tickets.retention import parse_age

    config = get_config(ctx)
    keep = older_than or (f"{config.store.keep_days}d" if config.store.keep_days else None)
    age = parse_age(keep) if keep is not None else None  # a bad age: one error, nothing changed
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
    if not report.worktrees and not report.branches and not report.kept and age is None and not baselines:
        console.print("nothing to collect")
    if baselines:
        if dry_run:
            console.print("would drop the checks' stored results on base commits")
        else:
            console.print(f"dropped {svc.store.drop_check_baselines()} stored check result(s) on base commits: "
                          "each is measured again by the next ticket from its commit")
    if age is not None and keep is not None:
        _prune_runs(svc, config, keep, age, dry_run)


def _prune_runs(svc: Any, config: Any, keep: str, age: Any, dry_run: bool) -> None:
    """Prune the run events and checkpoints of ended runs older than `age`, saying how far it got."""
    from orchestrator.running.checkpoints import open_checkpointer, prune_checkpoints
    from tickets.retention import PRUNE_CHUNK, cutoff

    store = svc.store  # writable from here on
    runs = store.prunable_runs(cutoff(age))
    if dry_run or not runs:
        console.print(f"{'would prune' if dry_run else 'pruned'} {len(runs)} ended run(s) older than {keep}")
        return
    checkpoints = open_checkpointer(config.checkpoint_target, reconnect_s=config.store.reconnect_s,
                                    pool=store.pool_for(config.checkpoint_target))
    events = 0
    try:
        for start in range(0, len(runs), PRUNE_CHUNK):
            chunk = runs[start : start + PRUNE_CHUNK]
            prune_checkpoints(checkpoints, chunk)  # first: a run with events left is found again
            events += store.prune_run_events(chunk)
            console.print(f"pruned {start + len(chunk)}/{len(runs)} run(s)")
    finally:
        checkpoints.close()
    console.print(f"pruned {len(runs)} ended run(s) older than {keep}: {events} run event(s) and their "
                  "checkpoints (each run's record, turns, end and feedback are kept)")

