"""What every `middle` subcommand (and a plugin's own command) gets from the click context: the
config and the services of this invocation. Kept apart from `orchestrator.cli.main` so that subcommand
modules and `plugin_api.memory_backend` never import the CLI itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.config.settings import Config
    from orchestrator.memory.facade import MemoryFacade
    from orchestrator.services import Services
    from tickets.store import TicketStore


class TicketsAtOnce(click.IntRange):
    """`--parallel N`: says what it wants (click's own words are "not a valid integer range")."""

    name = "count"

    def __init__(self, most: int = 64):
        super().__init__(1, most)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r}: give a positive integer, the number of tickets to run at once "
                      f"(1 to {self.max})", param, ctx)


def get_config(ctx: click.Context, *, required: bool = True) -> Config:
    """The config; commands that act on a project need its middle.toml to exist."""
    # Imported here: a plugin that adds a subcommand loads this module at `middle --help`,
    # which then needs no pydantic config.
    from orchestrator.config.memo import read_config
    from orchestrator.config.settings import load_config, require_config_file
    from orchestrator.plugins.manager import check_options

    path = (ctx.find_root().obj or {}).get("config_path")
    config = load_config(path)
    if required:
        require_config_file(config)
    if config.source is not None:
        # The options are validated by the backend's and the worker's own models (which import
        # every backend): once per change of the config, remembered with the read-only view.
        read_config(path, check=check_options)
    return config


def services(ctx: click.Context, config: Config, **kwargs: Any) -> Services:
    """The services for this command, closed when the command ends."""
    from orchestrator.services import Services

    svc = Services(config, **kwargs)
    ctx.call_on_close(svc.close)
    return svc


def default_project(config: Config, store: TicketStore | None) -> str:
    """The project a memory command means when none is named: [project] id, else the one project
    of the stored tickets, else the project folder's name."""
    if config.project.id:
        return config.project.id
    if store is not None:
        projects = {t.project_id for t in store.list_tickets()}
        if len(projects) == 1:
            return projects.pop()
        if projects:
            raise ConfigError(
                f"the tickets belong to several projects ({', '.join(sorted(projects))}): "
                "choose one with --project"
            )
    return config.resolve(config.project.path).name


def project_memory(ctx: click.Context, project: str | None, create: bool = False) -> tuple[MemoryFacade, str]:
    """The memory facade (from the shared services, with its memory model) and the project id
    (one named with --project must be known, see `_named_project`)."""
    config = get_config(ctx)
    svc = services(ctx, config)
    if svc.memory is None:
        raise ConfigError(
            "memory is off: set [memory] save_dir in middle.toml (or MEMORY_SAVE_DIR) and a "
            "backend other than 'none'"
        )
    if project is None:
        return svc.memory, default_project(config, svc.read_store())
    return svc.memory, _named_project(config, svc, svc.memory, project, create)


def project_curator(ctx: click.Context, project: str | None, create: bool = False) -> tuple[Any, str]:
    """The curation verbs (memory.curation.Curator: memory plus the ticket store that records
    each change) and the project id (see project_memory)."""
    config = get_config(ctx)
    svc = services(ctx, config)
    curator = svc.curator()  # ConfigError when memory is off
    if project is None:
        return curator, default_project(config, svc.read_store())
    return curator, _named_project(config, svc, curator.facade, project, create)


def _named_project(config: Config, svc: Any, facade: MemoryFacade, project: str, create: bool) -> str:
    """A project named with --project: the configured one, one of the stored tickets' or one
    with a memory store; another (a typo would start an empty store) only with --create."""
    from orchestrator.memory.projects import check_known
    from tickets.model import validate_project_id

    validate_project_id(project)  # its own error first, before any lookup
    store = svc.read_store()
    known = [config.project.id or config.resolve(config.project.path).name,  # as default_project
             *(store.project_ids() if store is not None else [])]
    return check_known(facade, project, known, create=create,
                       how="pass --create (`middle memory add --create` or `middle memory import --create`)")


def command_backend(ctx: click.Context, project: str | None, op: str) -> Any:
    """The project's backend under the facade's locks, for a plugin's own memory command."""
    mem, pid = project_memory(ctx, project)
    return mem.using(pid, op)
