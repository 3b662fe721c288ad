"""A check command as the graph carries it: `[check] commands` and a ticket's `check:` hold shell
lines or tables (`{run, junit, format, baseline}`); the graph's state keeps each as plain JSON
(a string when every option is the default, else the table), and the store keeps a command's
result on a base commit under its key (the shell line, or the table as sorted JSON), so a changed
option is measured again rather than compared with a result read another way.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from orchestrator.config.settings import CheckCommand

Item = str | dict[str, Any]  # a command as the graph's state holds it


def spec_of(item: Item | CheckCommand) -> CheckCommand:
    """The command's options, from a string, a table or a model (a bad table: ValueError saying what)."""
    if isinstance(item, CheckCommand):
        return item
    if isinstance(item, str):
        return CheckCommand(run=item)
    if isinstance(item, dict):
        try:
            return CheckCommand.model_validate(item)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'check'}: "
                                 f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
            raise ValueError(problems) from None
    raise ValueError(f"{item!r} is neither a shell line nor a table with `run`")


def to_item(spec: CheckCommand) -> Item:
    """The command as plain JSON: its shell line when every option is the default."""
    options = spec.model_dump(exclude_defaults=True)
    return spec.run if set(options) == {"run"} else spec.model_dump()


def key(item: Item | CheckCommand) -> str:
    """What the store keeps the command's base result under."""
    plain = to_item(spec_of(item))
    return plain if isinstance(plain, str) else json.dumps(plain, sort_keys=True, ensure_ascii=False)


def run_line(item: Item | CheckCommand) -> str:
    """The command's shell line, for messages."""
    return spec_of(item).run


def items(values: list[Any], where: str) -> list[Item]:
    """Commands from config or front matter as state items; a bad one is a ValueError naming `where`."""
    out: list[Item] = []
    for n, value in enumerate(values, 1):
        try:
            out.append(to_item(spec_of(value)))
        except ValueError as exc:
            raise ValueError(f"{where}: command {n}: {exc}") from None
    return out


__all__ = ["Item", "items", "key", "run_line", "spec_of", "to_item"]
