"""`middle memory search|list|add|delete|export`: the project memory from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.config import Config, load_config
from orchestrator.errors import ConfigError
from orchestrator.memory import MemoryFacade


def open_memory(config: Config, required: bool = True) -> MemoryFacade | None:
    if not config.memory_enabled:
        if required:
            raise ConfigError(
                "memory is off: set [memory] save_dir in middle.toml (or MEMORY_SAVE_DIR) and a "
                "backend other than 'none'"
            )
        return None
    from orchestrator.plugins import PluginRegistry

    return MemoryFacade(config.memory_dir, config.memory.backend, config.memory.options,
                        PluginRegistry(), num_to_retrieve=config.memory.num_to_retrieve)


def default_project(config: Config) -> str:
    """[project] id, else the one project the ticket store knows, else the project folder's name."""
    if config.project.id:
        return config.project.id
    if config.db_path.exists():
        from tickets.store import TicketStore

        with TicketStore(config.db_path) as store:
            projects = {t.project_id for t in store.list_tickets()}
        if len(projects) == 1:
            return projects.pop()
        if projects:
            raise ConfigError(
                f"the tickets belong to several projects ({', '.join(sorted(projects))}): "
                "choose one with --project"
            )
    return config.resolve(config.project.path).name


project_option = click.option("--project", "-p", default=None,
                              help="Project id (default: [project] id, else the only project of the tickets, else the project folder's name).")


def _ctx(ctx: click.Context, project: str | None) -> tuple[MemoryFacade, str]:
    config = load_config(ctx.obj["config_path"])
    memory = open_memory(config)
    ctx.call_on_close(memory.close)
    return memory, project or default_project(config)


@click.group()
def memory() -> None:
    """Search, list, add, delete and export project memory."""


@memory.command()
@click.argument("query")
@click.option("-k", "num", default=5, show_default=True, help="How many docs to return.")
@project_option
@click.pass_context
def search(ctx: click.Context, query: str, num: int, project: str | None) -> None:
    """Show what recall returns for QUERY, with scores."""
    mem, pid = _ctx(ctx, project)
    for result in mem.retrieve(pid, [query], num):
        if not result["docs"]:
            click.echo("(no memories)")
        for doc, score in zip(result["docs"], result["doc_scores"]):
            click.echo(f"{score:7.3f}  {doc}")


@memory.command(name="list")
@project_option
@click.pass_context
def list_(ctx: click.Context, project: str | None) -> None:
    """List every doc in the project's memory."""
    mem, pid = _ctx(ctx, project)
    docs = mem.list_docs(pid)
    for doc in docs:
        click.echo(doc)
    click.echo(f"({len(docs)} doc(s) in {mem.store_dir(pid)})", err=True)


@memory.command()
@click.argument("text")
@project_option
@click.pass_context
def add(ctx: click.Context, text: str, project: str | None) -> None:
    """Index TEXT as one doc."""
    mem, pid = _ctx(ctx, project)
    mem.index(pid, [text])
    click.echo(f"added 1 doc to {mem.store_dir(pid)}")


@memory.command()
@click.argument("text")
@project_option
@click.pass_context
def delete(ctx: click.Context, text: str, project: str | None) -> None:
    """Delete the doc whose text is exactly TEXT."""
    mem, pid = _ctx(ctx, project)
    removed = mem.delete(pid, [text])
    click.echo(f"deleted {removed} doc(s)")
    if not removed:
        raise click.exceptions.Exit(1)


@memory.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write JSON here instead of standard output.")
@project_option
@click.pass_context
def export(ctx: click.Context, output: str | None, project: str | None) -> None:
    """Export every doc of the project's memory as JSON."""
    mem, pid = _ctx(ctx, project)
    data = json.dumps({"project": pid, "backend": mem.backend_name, "docs": mem.list_docs(pid)},
                      ensure_ascii=False, indent=2)
    if output:
        Path(output).write_text(data + "\n", encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        click.echo(data)
