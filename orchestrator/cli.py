"""The `middle` command. The only place errors become user output: one line, non-zero exit."""

from __future__ import annotations

import logging
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.config import CONFIG_FILE, Config, load_config
from orchestrator.errors import MiddleError

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class MiddleGroup(click.Group):
    """Turns every MiddleError into `error: <message>` on stderr and exit code 1, no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MiddleError as exc:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
            sys.exit(1)


@click.group(cls=MiddleGroup)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help=f"Config file (default: ./{CONFIG_FILE}).")
@click.option("-v", "--verbose", is_flag=True, help="Log memory calls and graph steps.")
@click.version_option(package_name="middle-agent")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, verbose: bool) -> None:
    """middle-agent: a middle agent that works through tickets by driving Claude Code."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"config_path": config_path}


def get_config(ctx: click.Context) -> Config:
    return load_config(ctx.obj["config_path"])


def say(msg: str) -> None:
    console.print(f"  [dim]·[/] {escape(msg)}", soft_wrap=True)


def on_event(event: dict[str, Any]) -> None:
    """Stream Claude Code's progress: its tool calls and the first line of its text."""
    kind = event.get("type")
    if kind == "tool_use":
        inp = event.get("input") or {}
        target = inp.get("file_path") or inp.get("command") or inp.get("pattern") or ""
        console.print(f"    [cyan]▸ {escape(str(event.get('name')))}[/] {escape(str(target)[:100])}")
    elif kind == "text" and event.get("text", "").strip():
        console.print(f"    [dim]{escape(event['text'].strip().splitlines()[0][:120])}[/]")


def make_table(*names: str) -> Table:
    """A table that folds long cells instead of cutting them, so every name stays readable."""
    table = Table()
    for i, name in enumerate(names):
        table.add_column(name, overflow="fold", no_wrap=i == 0)
    return table


def open_orchestrator(config: Config, stack: ExitStack, fake: bool, **kwargs: Any):
    from orchestrator.runner import Orchestrator

    if fake:
        from orchestrator.offline import offline_model

        kwargs.update(stack.enter_context(offline_model(config)))
        kwargs.pop("api", None)
        console.print("[yellow]offline:[/] using the built-in fake model (no API key needed)")
    orch = stack.enter_context(Orchestrator(config, say=say, on_event=on_event, **kwargs))
    return orch


def report(outcome) -> None:
    color = {"complete": "green", "failed": "red"}.get(outcome.status, "yellow")
    line = (f"[bold {color}]{outcome.status}[/] ticket {outcome.ticket_id}: "
            f"{outcome.turns} turn(s), ${outcome.cost_usd:.4f}")
    if outcome.reason:
        line += f" — {escape(outcome.reason)}"
    console.print(line, soft_wrap=True)


@main.command()
@click.argument("ticket_ids", nargs=-1)
@click.option("--tickets", "tickets_dir", default=None, help="Ticket folder (default [project] tickets_dir).")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def run(ctx: click.Context, ticket_ids: tuple[str, ...], tickets_dir: str | None, fake: bool) -> None:
    """Run the given tickets, or every pending one, from the ticket folder."""
    config = get_config(ctx)
    with ExitStack() as stack:
        orch = open_orchestrator(config, stack, fake)
        loaded = orch.sync_tickets(tickets_dir)
        for problem in loaded.errors:
            err_console.print(f"[yellow]skipped:[/] {escape(str(problem))}", soft_wrap=True)
        ids = list(ticket_ids) or [t.id for t in orch.store.list_tickets(status="pending")]
        if not ids:
            console.print("no pending tickets (see `middle tickets`)")
        failed = 0
        for tid in ids:
            ticket = orch.store.get_ticket(tid)
            console.print(f"[bold]ticket {escape(tid)}[/]: {escape(ticket.title)}")
            outcome = orch.run_ticket(tid)
            report(outcome)
            failed += outcome.status != "complete"
        if failed or loaded.errors:
            sys.exit(1)


@main.command()
@click.argument("ticket_id")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def resume(ctx: click.Context, ticket_id: str, fake: bool) -> None:
    """Finish a ticket's interrupted or failed run from its last checkpoint."""
    with ExitStack() as stack:
        orch = open_orchestrator(get_config(ctx), stack, fake)
        outcome = orch.resume(ticket_id)
        report(outcome)
        if outcome.status != "complete":
            sys.exit(1)


def open_store(config: Config):
    from tickets.store import TicketStore

    return TicketStore(config.db_path)


@main.command()
@click.option("--status", default=None, help="Only tickets with this status.")
@click.pass_context
def tickets(ctx: click.Context, status: str | None) -> None:
    """List the tickets the store knows (`middle run` loads the ticket folder)."""
    store = open_store(get_config(ctx))
    table = make_table("id", "project", "status", "title", "note")
    for t in store.list_tickets(status=status):
        table.add_row(t.id, t.project_id, str(getattr(t.status, "value", t.status)), t.title,
                      (t.status_reason or "")[:60])
    console.print(table)


@main.command()
@click.argument("ticket_id")
@click.option("--full", is_flag=True, help="Do not shorten prompts and responses.")
@click.pass_context
def log(ctx: click.Context, ticket_id: str, full: bool) -> None:
    """Show every run and turn of a ticket: prompt, response, memories invoked, decision, cost."""
    from orchestrator.log_view import print_log

    print_log(console, open_store(get_config(ctx)), ticket_id, full=full)


@main.command()
@click.argument("ticket_id")
@click.pass_context
def revert(ctx: click.Context, ticket_id: str) -> None:
    """Delete a ticket's indexed summary from memory and mark the ticket reverted."""
    from orchestrator.memory_cli import open_memory
    from orchestrator.runner import revert_ticket

    config = get_config(ctx)
    removed = revert_ticket(open_store(config), open_memory(config, required=False), ticket_id)
    console.print(f"reverted ticket {ticket_id}: {removed} memory doc(s) deleted")


@main.command()
@click.option("--backend", default="sliding_window", help="Memory backend for the new config.")
def init(backend: str) -> None:
    """Write a starter middle.toml and a tickets/ folder with one example ticket."""
    from orchestrator.scaffold import write_starter

    for path in write_starter(Path.cwd(), backend):
        console.print(f"wrote {path}")
    console.print("next: edit tickets/*.md, export ANTHROPIC_API_KEY, then `middle run`")


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
    table = make_table("backend", "plugin", "options", "description")
    for name, r in sorted(reg.backends.items()):
        opts = ", ".join(f"{k}={f.default!r}" for k, f in r.cls.Options.model_fields.items())
        table.add_row(name, r.plugin, opts or "-", r.cls.description)
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
    main.add_command(demo)


_register_subcommands()
