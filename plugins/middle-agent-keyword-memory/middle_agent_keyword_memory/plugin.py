"""The plugin module named by the `middle_agent` entry point: the backend and its own command.

Every `middle` command loads this module (`middle --help` too, to list plugin commands), so it
imports the backend only inside the hooks: the backend's options are a pydantic model, and
importing pydantic would double the start-up of every command.
"""

from collections import Counter

import click

from orchestrator.plugin_api import ConfigError, hookimpl, memory_backend


@hookimpl
def register_memory_backends(register):
    from .backend import KeywordBackend  # imported when the registry collects backends

    register(KeywordBackend)


@click.command(name="keywords")
@click.option("-n", "top", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--project", "-p", default=None, help="Project id (default: as `middle memory list`).")
@click.pass_context
def keywords_command(ctx: click.Context, top: int, project: str | None) -> None:
    """The most frequent keywords in the project's keyword memory."""
    from .backend import KeywordBackend, keywords

    with memory_backend(ctx, project, "keywords") as backend:
        if not isinstance(backend, KeywordBackend):
            raise ConfigError("`middle memory keywords` needs [memory] backend = \"keyword\"")
        counts = Counter(word for doc in backend.list_docs() for word in keywords(doc))
    for word, count in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:top]:  # ties by word
        click.echo(f"{count:5d}  {word}")


@hookimpl
def register_commands(cli):
    cli.commands["memory"].add_command(keywords_command)
