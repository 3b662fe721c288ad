"""The installed plugins (`middle_agent` entry points), remembered between commands.

Finding entry points means importing importlib.metadata and reading every installed
distribution's metadata: a sixth of `middle --help`. The answer changes only when a package is
installed or removed, which changes the folder it is installed in (its `*.dist-info` folder is
created or deleted), or when the search path changes. So the index is remembered with the
modification time of every folder on `sys.path`, and scanned again when one differs. The memo is
JSON in the user's cache folder; one that is unreadable or not of our shape is scanned again.

An entry point is loaded here as importlib.metadata would (`module` or `module:attr.attr`).
The memo only says which plugins there are; before anything it names is imported, each entry
is checked against the entry points its distribution declares (`verified`): the memo records
each entry's `*.dist-info` folder, which must sit in a folder on `sys.path`, and that folder's
`entry_points.txt` (the file importlib.metadata reads) must declare exactly that entry point. A
memo that was edited (or left behind by an install that changed no folder time) could otherwise
make every `middle` command import any module; an entry that fails the check sends the index to
a fresh scan by importlib.metadata. The check reads one small file per plugin, so a command
still starts without importing importlib.metadata.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from orchestrator.config.paths import cache_root, memo_name
from orchestrator.names import ENTRY_POINT_GROUP
from tickets.cache_file import read_json, write_json

MEMO_VERSION = 2  # 2: each entry records its distribution's metadata folder (`source`)


@dataclass(frozen=True)
class PluginEntry:
    """One `middle_agent` entry point of an installed distribution."""

    name: str  # the entry point's name (the plugin's name in pluggy)
    value: str  # "package.module" or "package.module:attr"
    dist: str  # the distribution that declares it
    version: str
    source: str = ""  # its `*.dist-info` (or `*.egg-info`) folder, whose entry_points.txt declares it

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
    """`entries` (remembered, chosen by `keep`, about to be loaded) when each one's distribution
    declares it (`declared`); else the index scanned afresh by importlib.metadata (and
    remembered), the entries `keep` chooses of it."""
    bad = next((entry for entry in entries if not declared(entry)), None)
    if bad is None:
        return entries
    import logging

    logging.getLogger("middle.plugins").warning(
        "the plugin index %s names %s = %s, which no installed distribution declares: scanned "
        "the installed plugins again", _memo(), bad.name, bad.value)
    installed_plugins.cache_clear()
    return tuple(e for e in _rescan(_memo(), _key()) if keep(e)
                 and (e.name, e.value) not in {(b.name, b.value) for b in entries if not declared(b)})


def declared(entry: PluginEntry) -> bool:
    """Whether the metadata folder the entry names sits in a folder on sys.path and its
    entry_points.txt declares exactly this `middle_agent` entry point."""
    info = Path(entry.source) if entry.source else None
    if info is None or info.suffix not in (".dist-info", ".egg-info"):
        return False
    on_path = {os.path.realpath(p or ".") for p in sys.path}
    if os.path.realpath(info.parent) not in on_path:
        return False
    try:
        text = (info / "entry_points.txt").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return (entry.name, entry.value) in _group(text, ENTRY_POINT_GROUP)


def _group(text: str, group: str) -> set[tuple[str, str]]:
    """The (name, value) pairs of one section of an entry_points.txt (an INI file)."""
    pairs, inside = set(), False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
        elif inside and "=" in line and not line.startswith(("#", ";")):
            name, value = line.split("=", 1)
            pairs.add((name.strip(), value.strip()))
    return pairs


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
        source = getattr(dist, "_path", None)  # a PathDistribution's metadata folder
        found.append(PluginEntry(ep.name, ep.value, getattr(dist, "name", None) or "?",
                                 getattr(dist, "version", None) or "?",
                                 str(source) if source is not None else ""))
    return found
