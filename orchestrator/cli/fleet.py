"""`middle worker`: work the shared backlog on this machine until stopped (see orchestrator/running/fleet.py)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import click

from orchestrator.cli.context import TicketsAtOnce
from orchestrator.cli.output import console, err_console, safe, summary_line


class _QuietSkips:
    """A batch view that does not report tickets skipped because another worker has them or
    they wait for a dependency: a worker passes over those all the time."""

    def __init__(self, view: Any):
        self.view = view
        self._shown: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)

    def started(self, ticket: Any) -> None:
        """Not yet: the claim may go to another worker. Its first note says it started here."""

    def say(self, ticket_id: str, msg: str) -> None:
        if ticket_id not in self._shown:  # its first note is its "started" line: said once
            self._shown.add(ticket_id)
            self.view.started(SimpleNamespace(id=ticket_id, title=msg))
            return
        self.view.say(ticket_id, msg)

    def finished(self, outcome: Any) -> None:
        if outcome.status != "skipped":
            self.view.finished(outcome)


@click.command()
@click.option("--parallel", "-j", type=TicketsAtOnce(), default=None,
              help="Tickets at once on this machine (default [run] parallel).")
@click.option("--once", is_flag=True, help="Stop when nothing is left to start, instead of waiting for more.")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def worker(ctx: click.Context, parallel: int | None, once: bool, fake: bool) -> None:
    """Work the shared backlog on this machine: claim, run in a clone, push the branch."""
    from orchestrator.cli.context import get_config, services
    from orchestrator.cli.main import _stop_signals, say_local_note
    from orchestrator.lifecycle.next_steps import started_as
    from orchestrator.running.fleet import REMOTE, ensure_clone, work

    started_as(fake=fake)  # the hints its runs leave (`middle resume ID`) keep --fake
    config = get_config(ctx)
    clone = ensure_clone(config)
    if fake:
        console.print("[yellow]offline:[/] using the built-in fake model (no API key needed)")
    from orchestrator.cli.batch_view import make_view
    from orchestrator.running.batch import BatchInterrupted
    from orchestrator.running.orchestrator import Orchestrator

    svc = services(ctx, config, fake=fake, remote=REMOTE)
    orch = Orchestrator(config, services=svc, project_override=str(clone))
    ctx.call_on_close(orch.close)
    # A worker is there to start turns, claiming before it looks at a ticket: its configured
    # agent's model API is asked now (services.ready_coding_agent), not after its first claim.
    svc.ready_coding_agent()
    say_local_note(svc)
    n = parallel or config.run.parallel
    svc.store.size_pool(n)  # PostgreSQL: one pooled connection per ticket at once (plus one listening)
    where = config.store.url and svc.store.where or str(config.db_path)
    console.print(f"worker on {safe(where)}: {n} at once, clone {safe(clone)}"
                  + ("; stops when nothing is left" if once else "; Ctrl-C or SIGTERM stops it"))
    view = make_view(max(n, 2))  # several tickets may run: always name each line's ticket
    try:
        with _stop_signals():
            report = work(orch, parallel=n, once=once, view=_QuietSkips(view))
    except BatchInterrupted as exc:
        view.close()
        for tid in exc.ticket_ids:
            err_console.print(f"[yellow]interrupted:[/] {safe(tid)} (its claim is released; any "
                              "worker or `middle resume` continues it)")
        console.print(f"worker stopped ({safe(exc.why)})")
        return
    except KeyboardInterrupt:
        view.close()
        console.print("worker stopped")
        return
    finally:
        view.close()
    if report.started:
        console.print(summary_line(report.started))
    if any(o.status == "failed" for o in report.started):
        sys.exit(1)
