"""Which projects exist: a memory write naming a project nobody created (a mistyped `-p`, a wrong
id in an API path) is refused, naming the known ones, instead of starting an empty store that
the project's tickets would never read."""

from __future__ import annotations

from typing import Iterable

from orchestrator.errors import ConfigError
from orchestrator.memory.facade import MemoryFacade


class UnknownProject(ConfigError, LookupError):
    """A project id that no config, ticket or memory store knows (the HTTP API answers 404)."""


def check_known(facade: MemoryFacade, project_id: str, known: Iterable[str | None], *,
                create: bool, how: str) -> str:
    """`project_id` when it is known (in `known`: the configured project and the projects of
    the stored tickets; or it has a memory store) or `create` says to start it on purpose; else
    an UnknownProject naming the known ones and `how` to create it."""
    names = sorted({k for k in known if k})
    if create or project_id in names or facade.has_store(project_id) or facade.store_dir(project_id).is_dir():
        return project_id
    raise UnknownProject(
        f"no project {project_id!r} here (known: {', '.join(names) or 'none'}): check the project "
        f"id, or {how} to start its memory on purpose")
