"""`middle agents`: the registered coding agents, their options, and whether each one's CLI is here."""

from __future__ import annotations

import typing
from typing import Any

import click

from orchestrator.cli.output import console, make_table, safe
from orchestrator.errors import MiddleError


def cli_status(cls: Any, table: str = "[coding_agent.options]") -> tuple[bool | None, str]:
    """(found, what to show): the CLI's path; the install command when it is missing (naming
    `table`, where its options are set); None when the agent cannot say (no `find_cli`)."""
    from orchestrator.coding_agent.base import table_argument

    find = getattr(cls, "find_cli", None)
    if find is None:
        return None, "not checked (the agent has no find_cli)"
    try:
        return True, str(find(**table_argument(find, table)))
    except MiddleError as exc:  # CodingAgentError: its message names the install command
        return False, f"missing: {exc}"
    except Exception as exc:  # a plugin's find_cli that fails otherwise: said, not a traceback
        return False, f"could not be checked ({type(exc).__name__}: {exc})"


def type_name(annotation: Any) -> str:
    """An option's type as a person reads it: `float`, `list[str]`, `str | None`."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


def options_table(cls: Any) -> Any:
    table = make_table("option", "type", "default", "what it does")
    for key, field in cls.Options.model_fields.items():
        default = field.get_default(call_default_factory=True)
        table.add_row(key, safe(type_name(field.annotation)), safe(repr(default)), safe(field.description or "-"))
    return table


@click.command()
@click.argument("kind", required=False)
def agents(kind: str | None) -> None:
    """List the coding agents (`[coding_agent] kind`, a ticket's `coding_agent:`), their options, and their CLIs."""
    from orchestrator.plugins.manager import registry

    reg = registry()
    kinds = [kind] if kind is not None else sorted(reg.coding_agents)
    if kind is not None:
        reg.coding_agent_class(kind)  # an unknown kind: one error line listing the kinds
    table = make_table("kind", "plugin", "CLI", "offline demo", "options")
    for name in kinds:
        entry = reg.coding_agents[name]
        _found, where = cli_status(entry.cls)
        offline = "yes" if callable(getattr(entry.cls, "offline", None)) else "no"
        table.add_row(name, safe(entry.plugin), safe(where), offline, str(len(entry.cls.Options.model_fields)))
    console.print(table)
    for name in kinds:
        where = safe(f"([coding_agent.options] when it is [coding_agent] kind, else [coding_agents.{name}])")
        console.print(f"\n[bold]{safe(name)}[/] options {where}:")
        console.print(options_table(reg.coding_agents[name].cls))
    console.print(safe("\npick one with `[coding_agent] kind` in middle.toml, or per ticket with `coding_agent: KIND` "
                       "in its front matter; `middle demo --agent KIND` tries it offline"))
