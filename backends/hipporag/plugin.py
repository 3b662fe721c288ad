"""Registers the hipporag backend and its `middle memory graph` command."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.plugin_api import ConfigError, hookimpl, memory_backend


@hookimpl
def register_memory_backends(register):
    from .backend import HippoRAGBackend  # imported when the registry collects backends

    register(HippoRAGBackend)


@click.command(name="graph")
@click.option("--format", "fmt", type=click.Choice(["graphml", "json"]), default="graphml",
              show_default=True, help="GraphML (Gephi, yEd, Cytoscape) or node-link JSON.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of standard output.")
@click.option("--passages/--no-passages", default=True, show_default=True,
              help="Include passage nodes and their edges, not only the entity graph.")
@click.option("--project", "-p", default=None, help="Project id (default: as `middle memory list`).")
@click.pass_context
def graph_command(ctx: click.Context, fmt: str, output: Path | None, passages: bool,
                  project: str | None) -> None:
    """Export the hipporag memory graph (entities, facts, synonyms, passages)."""
    from .backend import HippoRAGBackend
    from .export import render, to_networkx

    with memory_backend(ctx, project, "graph") as backend:
        if not isinstance(backend, HippoRAGBackend):
            raise ConfigError("`middle memory graph` needs [memory] backend = \"hipporag\"")
        graph = to_networkx(backend, passages=passages)
    text = render(graph, fmt)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        click.echo(f"wrote {graph.number_of_nodes()} nodes and {graph.number_of_edges()} edges "
                   f"to {output.resolve()}", err=True)


@hookimpl
def register_commands(cli):
    cli.commands["memory"].add_command(graph_command)
