"""The installed plugins (`middle_agent` entry points), remembered between commands.

Finding entry points means importing importlib.metadata and reading every installed
distribution's metadata: a sixth of `middle --help`. The answer changes only when a package is
installed or removed, which changes the folder it is installed in (its `*.dist-info` folder is
created or deleted), or when the search path changes. So the index is remembered with the
modification time of every folder on `sys.path`, and scanned again when one differs. The memo is
JSON in the user's cache folder; one that is unreadable or not of our shape is scanned again.

An entry point is loaded here as importlib.metadata would (`module` or `module:attr.attr`).
The memo only says which plugins there are; before anything it names is imported, each entry
is checked against the entry points its distribution declares (`verified`): a memo that was
edited (or left behind by an install that changed no folder time) could otherwise make every
`middle` command import any module. An entry no installed distribution declares sends the
index to a fresh scan.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from orchestrator.config.paths import cache_root, memo_name
from orchestrator.names import ENTRY_POINT_GROUP
from tickets.cache_file import read_json, write_json

MEMO_VERSION = 1
log = logging.getLogger("middle.plugins")


@dataclass(frozen=True)
class PluginEntry:
    """One `middle_agent` entry point of an installed distribution."""

    name: str  # the entry point's name (the plugin's name in pluggy)
    value: str  # "package.module" or "package.module:attr"
    dist: str  # the distribution that declares it
    version: str

    def load(self) -> Any:
        module, _, attrs = self.value.partition(":")
        obj = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj


@functools.cache
def installed_plugins() -> tuple[PluginEntry, ...]:
    """Every installed `middle_agent` entry point, in importlib.metadata's order; read once per
    process (`middle --help` asks twice: are there plugins, then load them)."""
    key = _key()
    memo = _memo()
    entry = read_json(memo)
    try:
        if isinstance(entry, dict) and entry.get("key") == key:
            return tuple(PluginEntry(**{k: str(v) for k, v in e.items()}) for e in entry["plugins"])
    except (TypeError, KeyError, AttributeError):
        pass  # not of our shape: scan again
    return _rescan(memo, key)


def _memo() -> Path:
    return cache_root() / "plugins" / memo_name(Path(sys.prefix))


def _rescan(memo: Path, key: list) -> tuple[PluginEntry, ...]:
    plugins = tuple(_scan())
    write_json(memo, {"key": key, "plugins": [asdict(p) for p in plugins]})
    return plugins


def verified(entries: tuple[PluginEntry, ...],
             keep: Callable[[PluginEntry], bool]) -> tuple[PluginEntry, ...]:
    """`entries` (remembered, chosen by `keep`, about to be loaded) if an installed distribution
    declares each of them as a `middle_agent` entry point, exactly; else the index scanned
    afresh (and remembered), the entries `keep` chooses of it. Reads only those distributions'
    metadata."""
    if not entries:
        return entries
    from importlib.metadata import PackageNotFoundError, distribution

    for entry in entries:
        try:
            declared = [(ep.name, ep.value) for ep in
                        distribution(entry.dist).entry_points.select(group=ENTRY_POINT_GROUP)]
        except (PackageNotFoundError, ValueError):
            declared = []
        if (entry.name, entry.value) not in declared:
            break
    else:
        return entries
    log.warning("the plugin index %s names %s = %s, which no installed distribution declares: "
                "scanned the installed plugins again", _memo(), entry.name, entry.value)
    installed_plugins.cache_clear()
    return tuple(e for e in _rescan(_memo(), _key()) if keep(e))


def _key() -> list:
    """The search path and each folder's modification time: installing a package changes one."""
    stamps = []
    for entry in sys.path:
        try:
            stamps.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            stamps.append([entry, None])
    return [MEMO_VERSION, sys.executable, stamps]


def _scan() -> list[PluginEntry]:
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        found.append(PluginEntry(ep.name, ep.value, getattr(dist, "name", None) or "?",
                                 getattr(dist, "version", None) or "?"))
    return found
