"""Ticket sources: a folder of Markdown tickets, each with YAML front matter, read into `Ticket`s."""

from __future__ import annotations

import datetime as dt
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tickets.cache_file import read_json, write_json
from tickets.errors import ConfigError, TicketError
from tickets.model import Ticket, TicketValidationError, validate_project_id, validate_ticket_id

__all__ = [
    "LoadResult",
    "MarkdownFolderSource",
    "SourceContext",
    "too_long",
    "TicketFileError",
    "TicketSource",
    "load_ticket_file",
    "load_tickets",
]

PathArg = str | os.PathLike[str]
# Front-matter keys the source interprets; every other key is kept in Ticket.fields.
_RESERVED = ("title", "project", "id", "path", "depends_on")
# Keys a ticket may carry without a warning: the ones above plus free-form metadata we know of.
# Anything else is likely a typo (`pth:` for `path:`), so loading says so, naming file and key.
KNOWN_KEYS = frozenset({*_RESERVED, "description", "labels", "check", "check_must_pass", "coding_agent"})
# How a ticket starts, said on one line (every message about a file is one line).
_EXAMPLE = "'---', 'title: Fix the login bug', 'project: my-app', '---', then what to do, in Markdown"


@dataclass(frozen=True)
class TicketFileError:
    """One ticket file that could not be loaded: its absolute path and what to do about it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class LoadResult:
    """The tickets that loaded and the files that did not; one bad file never hides the rest.

    `warnings` are loaded tickets with something odd (an unknown front-matter key);
    `dependency_errors` are set by the runner once it knows every ticket id.
    """

    tickets: list[Ticket] = field(default_factory=list)
    errors: list[TicketFileError] = field(default_factory=list)
    warnings: list[TicketFileError] = field(default_factory=list)
    dependency_errors: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class SourceContext:
    """What a ticket source is opened with: the project's paths, its size limit, a cache place."""

    base_dir: Path  # where the config lives: relative paths in a source's options start here
    tickets_dir: Path  # [project] tickets_dir, absolute
    project_path: Path  # [project] path, absolute: the project of a ticket that names none
    max_ticket_chars: int  # [project] max_ticket_chars (the sync owner also checks every ticket)
    # Where a source may remember what it parsed (a cache, never state); None: do not remember.
    memo: Callable[[Path], Path] | None = None
    project_id: str | None = None  # [project] id, if set: the project of a ticket that names none
    state_dir: Path | None = None  # the project's state dir (.middle/), for a source's own caches
    # Config tables a source may read by name, as TOML gives them: {"github": {"api_url": ...}}.
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class TicketSource(Protocol):
    """Anything that can produce tickets (a folder, an issue tracker): what `load` needs.

    A class registered with the `register_ticket_sources` hook also has `kind` (its name in
    `[tickets] kind` and in `middle sync --from KIND:ARG`), `argument` (the option ARG sets) and
    a classmethod `open(options, context) -> TicketSource`.
    """

    where: str  # for messages: the folder, the repository

    def load(self) -> LoadResult:
        """Read every ticket, collecting per-ticket problems instead of raising."""


@runtime_checkable
class ClosingSource(Protocol):
    """A source that can say a ticket it had is closed or gone (an issue closed or deleted, a
    ticket file removed): an optional capability, declared by subclassing this (as the Markdown
    and GitHub sources do). Every sync asks it, before anything is written, which pending tickets
    it no longer lists are closed or gone (they become `discarded`, with the reason) and which
    discarded ones it lists again (they become `pending`)."""

    def closed(self, tickets: list[Ticket]) -> dict[str, str]:
        """Of these stored pending tickets the source no longer lists, those closed or gone: id -> why."""
        return {}

    def reopened(self, tickets: list[Ticket]) -> list[str] | dict[str, str]:
        """Of these stored discarded tickets the source lists again, those it had closed: their
        ids, or id -> why they are back."""
        return []


class _BadFile(Exception):
    """A problem with one ticket file; the message says what to fix."""


# What YAML was reading when the front matter ended (its error's context) -> what the user opened.
_UNCLOSED = {"quoted scalar": "a quoted value", "flow sequence": "a '['", "flow mapping": "a '{'"}


def _split_front_matter(text: str) -> tuple[Any, str]:
    """Return (parsed YAML front matter, body) of a Markdown ticket."""
    lines = text.splitlines()
    if not lines or lines[0].rstrip() != "---":
        raise _BadFile(f"no YAML front matter: start the file with these lines: {_EXAMPLE}")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise _BadFile("the front matter is never closed: add a '---' line after its last field")
    import yaml  # here: a folder whose files are all remembered (see load_tickets) needs no YAML

    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None) or ""
        if ("end of stream" in problem or "<stream end>" in problem) and getattr(err, "context_mark", None):
            # An unclosed quote or bracket is found only at the end of the front matter: name
            # the line it was opened on, which is the one to fix.
            mark = err.context_mark  # type: ignore[attr-defined]
            opened = next((what for key, what in _UNCLOSED.items() if key in context), None)
            problem = f"{opened} is never closed" if opened else problem
        where = f" at line {mark.line + 2}" if mark is not None else ""  # +2: 0-based, after '---'
        raise _BadFile(
            f"the front matter is not valid YAML{where} ({problem}): fix the 'key: value' lines "
            "between the '---' lines (quote values that contain ':' or '#')") from None
    return meta, "\n".join(lines[end + 1:]).strip()


def _text(meta: dict[str, Any], key: str) -> str | None:
    """A front-matter scalar as text (YAML reads `project: 42` as a number), None if absent."""
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _BadFile(f"'{key}' is a {type(value).__name__}, not text: write it as '{key}: some text' "
                       "(quote it if YAML reads it as something else)")
    return str(value).strip()


def _jsonable(value: Any) -> Any:
    """Turn what YAML can produce (dates, sets, bytes, NaN) into JSON-able values."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _project_path(meta: dict[str, Any], ticket_dir: Path, default: PathArg | None) -> str:
    raw = _text(meta, "path")
    if raw:
        # Relative to the ticket file, so a backlog folder can live inside (or next to) its repo.
        path = Path(raw).expanduser()
        path = (path if path.is_absolute() else ticket_dir / path).resolve()
        fix = f"fix the 'path' field (a relative path is relative to {ticket_dir})"
    elif default is not None:
        path = Path(default).expanduser().resolve()
        # the default is the config's [project] path: fixing it there mends every ticket at once
        fix = ("fix [project] path in middle.toml (every ticket without 'path:' works there), or give "
               "this one a 'path' field")
    else:
        raise _BadFile("no project path: add a 'path' field naming the project directory "
                       f"(relative paths are relative to {ticket_dir}), or pass a default project path")
    if not path.exists():
        raise _BadFile(f"project path {path} does not exist: {fix}, or create that directory")
    if not path.is_dir():
        raise _BadFile(f"project path {path} is not a directory: {fix}")
    return str(path)


def too_long(size: int, limit: int, unit: str = "characters") -> str:
    """Why a ticket over [project] max_ticket_chars is refused, and what to do."""
    # A huge ticket would be planned with, sent to Claude Code (which refuses it as too long) and
    # copied into every store: refuse it before anything is spent.
    return (f"the ticket is {size:,} {unit}, over the limit of {limit:,} characters "
            "([project] max_ticket_chars): put long material in a file of the project and "
            "point to it, or raise the limit")


def _too_long(size: int, limit: int, unit: str) -> _BadFile:
    return _BadFile(too_long(size, limit, unit))


def _check_commands(meta: dict[str, Any]) -> None:
    """`check:` (the ticket's own check commands, kept in its fields) must be a list of shell lines
    or tables with a `run` line (their other keys are checked when the ticket runs, against
    [[check.commands]]), `check_must_pass:` and `allow_removed_tests:` true or false."""
    raw = meta.get("check", [])
    if not isinstance(raw, list) or not all(
            (isinstance(c, str) and c.strip()) or (isinstance(c, dict) and isinstance(c.get("run"), str)
                                                   and c["run"].strip()) for c in raw):
        raise _BadFile("'check' must be a list of shell commands, e.g. 'check: [\"python -m pytest -q\"]', "
                       "or of tables such as '{run: \"npm test\", junit: \"junit.xml\"}' (or 'check: []' to "
                       "run none for this ticket)")
    if "allow_removed_tests" in meta and not isinstance(meta["allow_removed_tests"], bool):
        raise _BadFile("'allow_removed_tests' must be true or false (true: the ticket may remove or skip tests "
                       "the base commit ran)")
    if "check_must_pass" in meta and not isinstance(meta["check_must_pass"], bool):
        raise _BadFile("'check_must_pass' must be true or false (true: the ticket's checks must pass "
                       "outright, a failure the base commit already has is not excused)")
    # Whether the kind is registered is checked before the ticket runs (the plugins are not known here).
    if "coding_agent" in meta and not (isinstance(meta["coding_agent"], str) and meta["coding_agent"].strip()):
        raise _BadFile("'coding_agent' must name a coding agent's kind, e.g. 'coding_agent: codex' "
                       "(`middle agents` lists them)")


def _depends_on(meta: dict[str, Any]) -> list[str]:
    raw = meta.get("depends_on")
    if raw is None:
        return []
    items = [raw] if isinstance(raw, (str, int)) and not isinstance(raw, bool) else raw
    if not isinstance(items, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool)
                                              for i in items):
        raise _BadFile("'depends_on' must be a ticket id or a list of ticket ids, e.g. "
                       "'depends_on: [001-setup, 002-schema]'")
    ids = [str(i).strip() for i in items]
    for tid in ids:
        try:
            validate_ticket_id(tid)
        except TicketError as err:
            raise _BadFile(f"depends_on: {err}") from None
    return ids


def _parse(path: Path, default_project_path: PathArg | None, max_chars: int | None = None,
           default_project: str | None = None) -> Ticket:
    return _parse_with_keys(path, default_project_path, max_chars, default_project)[0]


def _parse_with_keys(path: Path, default_project_path: PathArg | None, max_chars: int | None = None,
                     default_project: str | None = None) -> tuple[Ticket, list[str]]:
    """Build a Ticket from one Markdown file, raising _BadFile with a fix for any problem; also
    return its front-matter keys that no part of middle-agent reads (likely typos). A file without
    'project:' belongs to `default_project` ([project] id), when there is one."""
    if max_chars is not None:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        if size > max_chars * 4:  # even all-ASCII text this long is over the limit: do not read it
            raise _too_long(size, max_chars, "bytes")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise _BadFile("the file is not UTF-8 text: save it as UTF-8") from None
    except OSError as err:
        raise _BadFile(f"cannot read the file ({err.strerror or err}): check it exists and is readable") from None
    if max_chars is not None and len(text) > max_chars:
        raise _too_long(len(text), max_chars, "characters")
    meta, body = _split_front_matter(text)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise _BadFile(
            f"the front matter is a {type(meta).__name__}, not a mapping: write 'key: value' lines "
            "such as 'title: Fix the login bug' and 'project: my-app'")
    title = _text(meta, "title")
    if not title:
        raise _BadFile("missing 'title': add a line such as 'title: Fix the login bug' to the front matter")
    project = _text(meta, "project") or default_project
    if not project:
        raise _BadFile("missing 'project': add a line such as 'project: my-app' (the project id, "
                       "which names the project's memory) to the front matter, or set [project] id "
                       "in middle.toml for every ticket that names none")
    try:
        validate_project_id(project)
    except ConfigError as err:
        raise _BadFile(f"{err}; fix the 'project' field") from None
    explicit_id = _text(meta, "id")
    ticket_id = explicit_id if explicit_id else path.stem
    try:
        validate_ticket_id(ticket_id)
    except TicketError as err:
        fix = "fix the 'id' field" if explicit_id else "rename the file or add an 'id' field"
        raise _BadFile(f"{err}; {fix}") from None
    project_path = _project_path(meta, path.parent, default_project_path)
    fields = _jsonable({k: v for k, v in meta.items() if str(k) not in _RESERVED})
    description = body
    # The body is the description; a 'description' field stands in only for an empty body
    # (and otherwise stays in fields like any other extra key).
    if not description and isinstance(fields.get("description"), str):
        description = fields.pop("description").strip()
    depends_on = _depends_on(meta)
    _check_commands(meta)
    unknown = sorted(str(k) for k in meta if str(k) not in KNOWN_KEYS)
    try:
        return Ticket(id=ticket_id, project_id=project, title=title, description=description,
                      project_path=project_path, source=str(path), fields=fields,
                      depends_on=depends_on), unknown
    except TicketValidationError as err:
        raise _BadFile(str(err)) from None


def load_ticket_file(path: PathArg, default_project_path: PathArg | None = None,
                     max_chars: int | None = None, default_project: str | None = None) -> Ticket:
    """Load one Markdown ticket; raises TicketError naming the file and the fix. A file without
    'project:' belongs to `default_project` ([project] id), as in load_tickets."""
    abs_path = Path(path).expanduser().resolve()
    if not abs_path.is_file():
        raise TicketError(f"{abs_path}: no such ticket file: check the path")
    try:
        return _parse(abs_path, default_project_path, max_chars, default_project)
    except _BadFile as err:
        raise TicketError(str(TicketFileError(str(abs_path), str(err)))) from None


class MissingTicketFolder(TicketError):
    """The ticket folder does not exist: an error, unless the store already holds tickets from
    another source (`middle sync --from github:...`), which are then used."""


def _refuse_link_out(path: Path, inside: list[Path]) -> None:
    """A ticket file that is a symlink to a file outside the ticket folder and the project is
    refused: the folder is what the project's tickets are, and a link must not read another file
    of the machine into a ticket (and into its prompts and memory)."""
    if not path.is_symlink():
        return
    target = path.resolve()
    if not any(target.is_relative_to(place) for place in inside):
        raise _BadFile(f"is a symlink to {target}, outside the ticket folder and the project: "
                       "copy the ticket into the folder instead of linking it")


def load_tickets(folder: PathArg, default_project_path: PathArg | None = None,
                 max_chars: int | None = None, memo: PathArg | None = None,
                 default_project: str | None = None) -> LoadResult:
    """Load every `*.md` ticket in `folder` (sorted by name), collecting per-file errors; a file
    without 'project:' belongs to `default_project` ([project] id) when given.

    A file longer than `max_chars` is refused (an error naming it) without being parsed. With
    `memo` (a JSON file), each file's outcome is remembered by its name, size, change time and
    inode, and a file unchanged since is not read again (as git's index does for `git status`).
    """
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        what, error = ("is not a folder", TicketError) if root.exists() else ("does not exist", MissingTicketFolder)
        raise error(f"ticket folder {root} {what}: pass the folder that holds your *.md tickets")
    result = LoadResult()
    seen: dict[str, Path] = {}
    remembered = (_FileMemo(Path(memo), root, default_project_path, max_chars, default_project)
                  if memo is not None else None)

    def parse(path: Path) -> tuple[Ticket, list[str]] | _BadFile:
        try:
            return _parse_with_keys(path, default_project_path, max_chars, default_project)
        except _BadFile as err:
            return err

    # Hidden files are editor backups and lock files (.#x.md), not tickets.
    paths = sorted(p for p in root.glob("*.md") if p.is_file() and not p.name.startswith("."))
    inside = [root] + ([Path(default_project_path).expanduser().resolve()] if default_project_path else [])
    for path in paths:
        try:
            _refuse_link_out(path, inside)
            outcome = remembered.outcome(path, parse) if remembered else parse(path)
            if isinstance(outcome, _BadFile):
                raise outcome
            ticket, unknown = outcome
            if ticket.id in seen:
                raise _BadFile(f"ticket id '{ticket.id}' is also used by {seen[ticket.id]}: give one "
                               "of them a different 'id' field (or rename the file)")
        except _BadFile as err:
            result.errors.append(TicketFileError(str(path), str(err)))
            continue
        seen[ticket.id] = path
        result.tickets.append(ticket)
        for key in unknown:
            result.warnings.append(TicketFileError(
                str(path), f"unknown front-matter key {key!r} is ignored (known keys: "
                           f"{', '.join(sorted(KNOWN_KEYS))}); fix it if it is a typo"))
    if remembered:
        remembered.save()
    return result


class _FileMemo:
    """Each ticket file's parsed outcome (a ticket and its unknown keys, or the problem), keyed by
    what changes when the file is written. A cache, not state: unreadable or foreign content is
    ignored, and every remembered ticket is checked again as a new Ticket is."""

    VERSION = 3  # 2: the default project is part of the context; 3: `check:` is checked
    # A file changed within this long of being remembered could change again within the file
    # system's time resolution without its stamp moving (git's "racily clean" entries): such a
    # file is parsed every time until it is older.
    RACY_S = 2.0

    def __init__(self, path: Path, folder: Path, default_project_path: PathArg | None, max_chars: int | None,
                 default_project: str | None = None):
        self.path = path
        # What every outcome also depends on, compared whole (with the folder: two folders whose
        # memo files share a name only replace each other's memo).
        self.context = [self.VERSION, str(folder), str(default_project_path), max_chars, default_project]
        self.old: dict[str, Any] = {}
        self.new: dict[str, Any] = {}
        self.changed = False
        data = read_json(path)
        if isinstance(data, dict) and data.get("context") == self.context and isinstance(data.get("files"), dict):
            self.old = data["files"]

    @staticmethod
    def stamp(path: Path) -> list[int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def outcome(self, path: Path, parse: Callable[[Path], tuple[Ticket, list[str]] | _BadFile]
                ) -> tuple[Ticket, list[str]] | _BadFile:
        """The file's remembered outcome, or `parse(path)`'s (remembered for next time)."""
        stamp = self.stamp(path)  # before the read: see put
        remembered = self._get(path, stamp)
        if remembered is not None:
            return remembered
        parsed = parse(path)
        self._put(path, parsed, stamp)
        return parsed

    def _get(self, path: Path, stamp: list[int] | None) -> tuple[Ticket, list[str]] | _BadFile | None:
        entry = self.old.get(path.name)
        if not isinstance(entry, dict) or stamp is None or entry.get("stamp") != stamp:
            return None
        try:
            if "error" in entry:
                outcome: Any = _BadFile(str(entry["error"]))
            else:
                ticket = Ticket(**entry["ticket"])
                unknown = [str(k) for k in entry["unknown"]]
                if not Path(ticket.project_path).is_dir():  # removed since: parse and say so
                    return None
                outcome = (ticket, unknown)
        except (TypeError, ValueError, KeyError):
            return None
        self.new[path.name] = entry
        return outcome

    def _put(self, path: Path, outcome: tuple[Ticket, list[str]] | _BadFile, before: list[int] | None) -> None:
        """Remember `outcome`, parsed from `path` whose stamp was `before` the read."""
        stamp = self.stamp(path)
        # A stamp that moved during the read means another process wrote the file meanwhile: what
        # was read may be half of it, so it must not be remembered under the new stamp.
        if stamp is None or stamp != before or time.time_ns() - stamp[1] < self.RACY_S * 1e9:
            self.changed = True  # not remembered: an older entry for it must go
            return
        if isinstance(outcome, _BadFile):
            entry: dict[str, Any] = {"stamp": stamp, "error": str(outcome)}
        else:
            # Without its times: a ticket served from here is stamped when loaded, as a parsed one is.
            data = {k: v for k, v in outcome[0].to_dict().items() if k not in ("created_at", "updated_at")}
            entry = {"stamp": stamp, "ticket": data, "unknown": outcome[1]}
        self.new[path.name] = entry
        self.changed = True

    def save(self) -> None:
        if not self.changed and set(self.old) == set(self.new):
            return
        write_json(self.path, {"context": self.context, "files": self.new})


# Why a pending ticket of a Markdown folder is discarded: its file went (or now gives another id).
GONE_NOTE = "its file {file} is gone from the ticket folder"
RENAMED_NOTE = "its file {file} now gives another ticket id"


class MarkdownFolderSource(ClosingSource):
    """A `TicketSource` over a folder of Markdown tickets with YAML front matter (the default).

    A pending ticket whose file was removed from the folder (or now gives another id) is closed:
    a sync discards it, saying why, and puts it back to pending when the file is back."""

    kind = "markdown"
    argument = "folder"  # `middle sync --from markdown:DIR`
    OPTIONS = frozenset({"folder"})

    def __init__(self, folder: PathArg, default_project_path: PathArg | None = None,
                 max_chars: int | None = None, memo: PathArg | None = None, *,
                 base_dir: PathArg | None = None, default_project: str | None = None) -> None:
        self.folder = folder
        self.default_project = default_project  # [project] id: the project of a ticket that names none
        self.default_project_path = default_project_path
        self.max_chars = max_chars
        self.memo = memo
        self.base_dir = base_dir  # file names in messages are relative to it (the config's folder)
        self._files: dict[str, str] | None = None  # after load: each loaded file's ticket id
        self._broken: set[str] = set()  # after load: the files that did not load

    @classmethod
    def open(cls, options: dict[str, Any], context: SourceContext) -> MarkdownFolderSource:
        """The folder of `options["folder"]` (relative to the config), else [project] tickets_dir."""
        unknown = sorted(set(options) - cls.OPTIONS)
        if unknown:
            raise ConfigError(f"bad [tickets.options] for source 'markdown': unknown option(s) "
                              f"{', '.join(unknown)}. Allowed options: folder")
        raw = options.get("folder")
        if raw is not None and not isinstance(raw, str):
            raise ConfigError("bad [tickets.options] for source 'markdown': folder must be a path (text)")
        folder = (context.base_dir / Path(raw).expanduser()).resolve() if raw else context.tickets_dir
        memo = context.memo(folder) if context.memo is not None else None
        return cls(folder, context.project_path, context.max_ticket_chars, memo, base_dir=context.base_dir,
                   default_project=context.project_id)

    @property
    def where(self) -> str:
        return str(Path(self.folder).expanduser().resolve())

    def load(self) -> LoadResult:
        result = load_tickets(self.folder, self.default_project_path, self.max_chars, self.memo, self.default_project)
        self._files = {t.source: t.id for t in result.tickets if t.source}
        self._broken = {e.path for e in result.errors}
        return result

    def _name(self, path: Path) -> str:
        """A ticket file as messages name it: relative to the config's folder when inside it."""
        if self.base_dir is not None:
            try:
                return str(path.relative_to(Path(self.base_dir).resolve()))
            except ValueError:
                pass
        return str(path)

    def _note(self, ticket: Ticket) -> str | None:
        """Why this folder no longer gives the ticket, if it is one of this folder's files (a
        file that did not load is being edited: it is kept as it is)."""
        path = Path(ticket.source) if ticket.source else None
        if self._files is None or path is None or path.parent != Path(self.where) or str(path) in self._broken:
            return None  # not loaded (no folder), or not a file of this folder
        if not path.exists():
            return GONE_NOTE.format(file=self._name(path))
        if self._files.get(str(path), ticket.id) != ticket.id:
            return RENAMED_NOTE.format(file=self._name(path))
        return None

    def closed(self, tickets: list[Ticket]) -> dict[str, str]:
        """Of these pending tickets the folder no longer gives, those whose file went: id -> why."""
        return {t.id: note for t in tickets if (note := self._note(t)) is not None}

    def reopened(self, tickets: list[Ticket]) -> dict[str, str]:
        """Of these discarded tickets the folder gives again, those discarded for their file: id -> why."""
        back = {}
        for t in tickets:
            path = Path(t.source) if t.source else None
            if path is not None and t.status_reason in (GONE_NOTE.format(file=self._name(path)),
                                                        RENAMED_NOTE.format(file=self._name(path))):
                back[t.id] = "its file is back in the ticket folder"
        return back
