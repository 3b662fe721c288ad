"""The `middle` command. The only place errors become user output: one line, non-zero exit."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from orchestrator.cli_output import (
    console, err_console, make_table, on_event, report, safe, say, shorten, summary_line,
)
from orchestrator.config import CONFIG_FILE, Config, load_config, require_config_file
from orchestrator.errors import MiddleError

EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by Ctrl-C (SIGINT)


class MiddleGroup(click.Group):
    """Turns every MiddleError into `error: <message>` on stderr and exit code 1, no traceback.

    Plugins add commands through the `register_commands` hook, loaded on first lookup.
    """

    _plugins_loaded = False

    def _load_plugin_commands(self) -> None:
        if MiddleGroup._plugins_loaded:
            return
        MiddleGroup._plugins_loaded = True
        from orchestrator.plugins import PluginRegistry, call_hook

        try:
            call_hook(PluginRegistry().hook, "register_commands", cli=self)
        except MiddleError as exc:  # a broken plugin must not take the built-in commands down
            err_console.print(f"[yellow]warning:[/] plugin commands not loaded: {safe(exc)}")

    def get_command(self, ctx: click.Context, name: str) -> Any:
        command = super().get_command(ctx, name)
        if command is None or name == "memory":
            self._load_plugin_commands()
            command = super().get_command(ctx, name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MiddleError as exc:
            err_console.print(f"[bold red]error:[/] {safe(exc)}")
            sys.exit(1)
        except click.UsageError as exc:  # a bad option or argument: one line too, with where to look
            where = f"`{exc.ctx.command_path} --help`" if exc.ctx else "`middle --help`"
            err_console.print(f"[bold red]error:[/] {safe(exc.format_message())} (see {where})")
            sys.exit(exc.exit_code)


@click.group(cls=MiddleGroup)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help=f"Config file (default: ./{CONFIG_FILE}, or MIDDLE_CONFIG).")
@click.option("-v", "--verbose", is_flag=True, help="Log memory calls and graph steps.")
@click.version_option(package_name="middle-agent")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, verbose: bool) -> None:
    """middle-agent: a middle agent that works through tickets by driving Claude Code."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"config_path": config_path}


def get_config(ctx: click.Context, *, required: bool = True) -> Config:
    """The config; commands that act on a project need its middle.toml to exist."""
    config = load_config(ctx.find_root().obj["config_path"])
    if required:
        require_config_file(config)
    return config


def services(ctx: click.Context, config: Config, **kwargs: Any):
    """The services for this command, closed when the command ends."""
    from orchestrator.services import Services

    svc = Services(config, **kwargs)
    ctx.call_on_close(svc.close)
    return svc


def open_orchestrator(ctx: click.Context, config: Config, fake: bool):
    from orchestrator.runner import Orchestrator

    if fake:
        console.print("[yellow]offline:[/] using the built-in fake model (no API key needed)")
    orch = Orchestrator(config, services=services(ctx, config, fake=fake), say=say, on_event=on_event)
    ctx.call_on_close(orch.close)
    return orch


def _interrupted(ticket_id: str) -> None:
    err_console.print(f"[yellow]interrupted:[/] middle resume {safe(ticket_id)}")
    sys.exit(EXIT_INTERRUPTED)


@main.command()
@click.argument("ticket_ids", nargs=-1)
@click.option("--tickets", "tickets_dir", default=None, help="Ticket folder (default [project] tickets_dir).")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.option("--rerun", is_flag=True, help="Also start tickets that are already complete.")
@click.pass_context
def run(ctx: click.Context, ticket_ids: tuple[str, ...], tickets_dir: str | None, fake: bool,
        rerun: bool) -> None:
    """Run the given tickets, or every pending one, from the ticket folder."""
    orch = open_orchestrator(ctx, get_config(ctx), fake)
    loaded = orch.sync_tickets(tickets_dir)
    for problem in loaded.errors:
        err_console.print(f"[yellow]skipped:[/] {safe(problem)}")
    ids = list(ticket_ids) or [t.id for t in orch.store.list_tickets(status="pending")]
    for tid in ids:
        orch.store.get_ticket(tid)  # an unknown id is an error before anything runs
    if not ids:
        console.print("no pending tickets (see `middle tickets`)")
    outcomes = []
    for tid in ids:
        console.print(f"[bold]ticket {safe(tid)}[/]: {safe(orch.store.get_ticket(tid).title)}")
        try:
            # Named tickets are refused when another process holds them; the pending list skips them.
            outcome = orch.run_ticket(tid, rerun=rerun, skip_claimed=not ticket_ids)
        except KeyboardInterrupt:
            _interrupted(tid)
        report(outcome)
        outcomes.append(outcome)
    if outcomes:
        console.print(summary_line(outcomes))
    if any(o.status == "failed" for o in outcomes) or loaded.errors:
        sys.exit(1)


@main.command()
@click.argument("ticket_id")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def resume(ctx: click.Context, ticket_id: str, fake: bool) -> None:
    """Finish a ticket's interrupted or failed run from its last checkpoint."""
    orch = open_orchestrator(ctx, get_config(ctx), fake)
    try:
        outcome = orch.resume(ticket_id)
    except KeyboardInterrupt:
        _interrupted(ticket_id)
    report(outcome)
    if outcome.status != "complete":
        sys.exit(1)


@main.command()
@click.option("--status", default=None, help="Only tickets with this status.")
@click.pass_context
def tickets(ctx: click.Context, status: str | None) -> None:
    """List the tickets: the ticket folder's, with their status from past runs."""
    from tickets.model import TicketStatus
    from tickets.source import load_tickets

    config = get_config(ctx)
    if status is not None and status not in {s.value for s in TicketStatus}:
        raise click.BadParameter(f"use one of {', '.join(s.value for s in TicketStatus)}", param_hint="--status")
    store = services(ctx, config).read_store()  # read-only: creates no file
    known = {t.id: t for t in store.list_tickets()} if store else {}
    folder = load_tickets(config.resolve(config.project.tickets_dir), config.resolve(config.project.path))
    rows = dict(known)
    for t in folder.tickets:
        rows.setdefault(t.id, t)  # not run yet: pending, as in the file
    table = make_table("id", "project", "status", "title", "note")
    for t in sorted(rows.values(), key=lambda t: t.id):
        st = t.status.value
        if status and st != status:
            continue
        table.add_row(safe(t.id), safe(t.project_id), st, safe(shorten(t.title, 60)),
                      safe(shorten(t.status_reason or "", 60)))
    console.print(table)
    for problem in folder.errors:
        err_console.print(f"[yellow]skipped:[/] {safe(problem)}")


@main.command()
@click.argument("ticket_id")
@click.option("--full", is_flag=True, help="Do not shorten prompts and responses.")
@click.option("--follow", "-f", is_flag=True, help="Stream the latest run's events live until it ends.")
@click.pass_context
def log(ctx: click.Context, ticket_id: str, full: bool, follow: bool) -> None:
    """Show every run and turn of a ticket: prompt, response, memories invoked, decision, cost."""
    from orchestrator.errors import TicketError
    from orchestrator.log_view import follow_log, print_log

    store = services(ctx, get_config(ctx)).read_store()
    if store is None:
        raise TicketError(f"no ticket {ticket_id!r} has run yet: start it with `middle run {ticket_id}`")
    if follow:
        follow_log(console, store, ticket_id)
        return
    print_log(console, store, ticket_id, full=full)


@main.command()
@click.argument("ticket_id")
@click.pass_context
def revert(ctx: click.Context, ticket_id: str) -> None:
    """Delete a ticket's indexed summary from memory and mark the ticket reverted."""
    from orchestrator.runner import revert_ticket

    svc = services(ctx, get_config(ctx))
    removed = revert_ticket(svc.store, svc.memory, ticket_id)
    console.print(f"reverted ticket {safe(ticket_id)}: {removed} memory doc(s) deleted")


@main.command()
@click.option("--backend", default="hybrid", show_default=True,
              help="Memory backend for the new config (see `middle backends`).")
@click.pass_context
def init(ctx: click.Context, backend: str) -> None:
    """Write a starter middle.toml and a tickets/ folder with one example ticket."""
    from orchestrator.plugins import PluginRegistry
    from orchestrator.scaffold import write_starter

    PluginRegistry().backend_class(backend)  # an unknown name is an error before any file
    path = Path(ctx.find_root().obj["config_path"] or CONFIG_FILE)
    result = write_starter(path, backend)
    for line in result:
        console.print(safe(line))
    console.print("next: edit tickets/*.md, export ANTHROPIC_API_KEY, then `middle run` "
                  "(or `middle run --fake` to try it offline)")


@main.command()
def graph() -> None:
    """Print the ticket workflow as a Mermaid diagram."""
    from orchestrator.graph import mermaid

    click.echo(mermaid())


@main.command()
def backends() -> None:
    """List the memory backends that are loaded, and which plugin registered each."""
    from orchestrator.plugins import PluginRegistry

    reg = PluginRegistry()
    table = make_table("backend", "recall", "plugin", "options", "description")
    for name, r in sorted(reg.backends.items()):
        opts = ", ".join(f"{k}={f.default!r}" for k, f in r.cls.Options.model_fields.items())
        recall = "by recency (query ignored)" if r.cls.recall == "recency" else "by relevance"
        table.add_row(name, recall, r.plugin, opts or "-", r.cls.description)
    console.print(table)


@main.command()
def plugins() -> None:
    """List the loaded plugins, where each comes from, and the hooks it implements."""
    from orchestrator.plugins import PluginRegistry

    table = make_table("plugin", "source", "hooks", "file")
    for row in PluginRegistry().plugin_rows():
        table.add_row(row["name"], row["source"], row["hooks"], row["file"])
    console.print(table)


def _register_subcommands() -> None:
    from orchestrator.demo import demo
    from orchestrator.memory_cli import memory

    main.add_command(memory)
    from orchestrator.bench.cli import bench; main.add_command(bench)  # noqa: E702
    main.add_command(demo)
    from orchestrator.server.serve import serve; main.add_command(serve)  # noqa: E702


_register_subcommands()


if __name__ == "__main__":  # `python -m orchestrator.cli`, as the `middle` script does
    main()
