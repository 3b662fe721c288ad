"""Tickets created from the API are written as Markdown files in the ticket folder (its source of truth)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import yaml

from orchestrator.config.settings import Config
from orchestrator.errors import TicketError
from orchestrator.server.errors import Conflict
from tickets.model import Ticket, validate_project_id, validate_ticket_id
from tickets.source import load_ticket_file

_NUMBERED = re.compile(r"^(\d+)-")


def slug(title: str, limit: int = 40) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return words[:limit].rstrip("-") or "ticket"


def next_id(folder: Path, title: str) -> str:
    """`NNN-slug`, numbered after the folder's highest `NNN-` file, like the example backlog."""
    numbers = [int(m.group(1)) for p in folder.glob("*.md") if (m := _NUMBERED.match(p.name))]
    return f"{max(numbers, default=0) + 1:03d}-{slug(title)}"


def render(title: str, project: str, description: str, path: str | None) -> str:
    meta = {"title": title, "project": project}
    if path:
        meta["path"] = path
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000)
    return f"---\n{front}---\n{description.strip()}\n"


def _inside_project(config: Config, folder: Path, path: str) -> None:
    """A ticket created through the API works on the configured project (its directory or one
    inside it), never on another repository of the machine: its branch and commits would be made
    there, by whoever can reach the server."""
    project = config.resolve(config.project.path)
    target = (folder / Path(path).expanduser()).resolve()  # relative to the ticket folder, as loaded
    if not target.is_relative_to(project):
        raise TicketError(f"path {path!r} ({target}) is outside this server's project {project}: "
                          "leave 'path' out (tickets run in [project] path) or name a directory inside it")


def create_ticket_file(config: Config, *, title: str, project: str, description: str = "",
                       ticket_id: str | None = None, path: str | None = None) -> Ticket:
    """Write `<tickets_dir>/<id>.md` (never over an existing file) and load it back as a Ticket.

    A file that does not load (bad project path, ...) is removed again and the error raised.
    """
    if not title.strip():
        raise TicketError("title is empty: give the ticket a short title")
    validate_project_id(project)
    folder = config.resolve(config.project.tickets_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tid = validate_ticket_id(ticket_id) if ticket_id else next_id(folder, title)
    if path:
        _inside_project(config, folder, path)
    target = folder / f"{tid}.md"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".new-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render(title.strip(), project, description, path))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, target)  # atomic, and fails instead of overwriting an existing ticket
        except FileExistsError:
            raise Conflict(f"a ticket file {target.name} already exists in the ticket folder: "
                           "choose another id") from None
    finally:
        os.unlink(tmp)
    try:
        return load_ticket_file(target, config.resolve(config.project.path))
    except TicketError:
        target.unlink(missing_ok=True)
        raise
