"""Registers the hindsight backend and its commands: `middle memory recall|reflect|forget|models`."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import click

from orchestrator.plugin_api import ConfigError, hookimpl, memory_backend

from .kinds import KINDS

if TYPE_CHECKING:
    from .backend import HindsightBackend

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@hookimpl
def register_memory_backends(register):
    from .backend import HindsightBackend  # imported when the registry collects backends

    register(HindsightBackend)


def _safe(text: str) -> str:
    """Stored text without terminal control characters (they could recolour the terminal)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def _hindsight(ctx: click.Context, project: str | None, op: str):
    """The project's hindsight backend under the facade's locks, or a one-line ConfigError."""
    from .backend import HindsightBackend

    manager = memory_backend(ctx, project, op)

    class _Checked:
        def __enter__(self) -> HindsightBackend:
            backend = manager.__enter__()
            if not isinstance(backend, HindsightBackend):
                manager.__exit__(None, None, None)
                raise ConfigError(f"`middle memory {op}` needs [memory] backend = \"hindsight\"")
            return backend

        def __exit__(self, *exc):
            return manager.__exit__(*exc)

    return _Checked()


project_option = click.option("--project", "-p", default=None,
                              help="Project id (default: as `middle memory list`).")


@click.command(name="recall")
@click.argument("query")
@click.option("--budget", default=10, show_default=True, type=click.IntRange(min=1),
              help="Most facts to return.")
@click.option("--max-tokens", default=None, type=click.IntRange(min=1),
              help="Token budget (~4 characters each) for all facts together.")
@click.option("--type", "types", multiple=True, type=click.Choice(KINDS), help="Fact kinds (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only facts with these tags (repeatable).")
@click.option("--all-tags", is_flag=True, help="Require every --tag, not any.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of lines.")
@project_option
@click.pass_context
def recall_command(ctx, query, budget, max_tokens, types, tags, all_tags, as_json, project):
    """Recall facts for QUERY: semantic, keyword, graph and temporal strategies fused."""
    with _hindsight(ctx, project, "recall") as backend:
        result = backend.recall_query(query, budget, max_tokens, list(types) or None, list(tags),
                                      "all" if all_tags else "any")
    if result.truncated:
        click.echo(f"note: query cut to {len(result.query)} characters (max_query_chars)", err=True)
    if as_json:
        click.echo(json.dumps({"query": result.query, "truncated": result.truncated, "facts": [
            {"id": h.id, "text": h.text, "kind": h.kind, "when": h.when, "score": h.score,
             "sources": h.sources, "found_by": h.found_by} for h in result.hits]}, ensure_ascii=False))
        return
    if not result.hits:
        click.echo("(no memories)")
    for h in result.hits:
        via = ",".join(h.found_by)
        click.echo(f"{h.score:6.3f}  [{h.id}] {h.kind:<11} {h.when or '-':<18} {_safe(h.text)}  ({via})")


@click.command(name="reflect")
@click.argument("question")
@project_option
@click.pass_context
def reflect_command(ctx, question, project):
    """Answer QUESTION from memory (with the memory LLM), or show the recalled facts grouped."""
    with _hindsight(ctx, project, "reflect") as backend:
        result = backend.reflect(question)
    click.echo(_safe(result.answer))
    if result.synthesised and result.fact_ids:
        click.echo(f"\n(facts used: {', '.join(str(i) for i in result.fact_ids)})")


@click.command(name="forget")
@click.argument("fact_id", type=int)
@project_option
@click.pass_context
def forget_command(ctx, fact_id, project):
    """Delete one fact (by the id `middle memory recall` shows)."""
    with _hindsight(ctx, project, "forget") as backend:
        removed = backend.delete_fact(fact_id)
    if not removed:
        raise ConfigError(f"no fact {fact_id} in this bank: see `middle memory recall QUERY` for ids")
    click.echo(f"deleted fact {fact_id}")


@click.command(name="models")
@click.option("--refresh", is_flag=True, help="Refresh the mental models now.")
@project_option
@click.pass_context
def models_command(ctx, refresh, project):
    """Show the mental models (curated summaries the middle agent reads first)."""
    with _hindsight(ctx, project, "models") as backend:
        if refresh:
            backend.refresh_mental_models()
        models = backend.mental_models()
    if not models:
        click.echo("(no mental models yet: they are built after the first retain)")
    for m in models:
        click.echo(f"### {_safe(m['name'])} (v{m['version']}): {_safe(m['question'])}\n{_safe(m['content'])}\n")


@hookimpl
def register_commands(cli):
    group = cli.commands["memory"]
    for command in (recall_command, reflect_command, forget_command, models_command):
        group.add_command(command)
