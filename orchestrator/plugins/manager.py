"""The plugin manager: built-in plugins plus the `middle_agent` entry-point group, and the registries."""

from __future__ import annotations

import importlib
import os
import re
import threading
from collections.abc import Callable, Container
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pluggy

from orchestrator.errors import ConfigError
from orchestrator.plugins import hookspecs, trace
from orchestrator.plugins.index import PluginEntry, installed_plugins, verified
from orchestrator.plugins.memory_backend import MemoryBackend

if TYPE_CHECKING:
    from orchestrator.plugins.backend_options import BackendOptions


# Which installed plugins load: see LOAD_PLUGINS_VARIABLE (as simonw/llm's LLM_LOAD_PLUGINS).
from orchestrator.names import LOAD_PLUGINS_VARIABLE  # noqa: E402

# Built-in plugins register through the same hooks a third-party plugin uses (as pytest's
# default_plugins). This tuple is the only place that names them.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "backends.none.plugin",
    "backends.sliding_window.plugin",
    "backends.dense.plugin",
    "backends.bm25.plugin",
    "backends.hybrid.plugin",
    "backends.hindsight.plugin",
    "backends.hipporag.plugin",
    "orchestrator.coding_agent.plugin",
    "orchestrator.coding_agent.codex_plugin",
    "orchestrator.coding_agent.aider_plugin",
    "orchestrator.coding_agent.gemini_plugin",
    "orchestrator.coding_agent.opencode_plugin",
    "orchestrator.github.plugin",
    "tickets.plugin",
)

_NAME = re.compile(r"^[a-z][a-z0-9_\-]{0,63}$")


@dataclass(frozen=True)
class Registered:
    """A registered backend, coding agent or ticket source class and the plugin that registered it."""

    name: str
    cls: Any  # a MemoryBackend subclass, a coding agent or ticket source class (each with its Options model)
    plugin: str


class PluginRegistry:
    """Loads plugins once and holds what they registered: memory backends, coding agents, ticket sources."""

    def __init__(self, *, load_entry_points: bool = True, extra_plugins: tuple[Any, ...] = ()):
        self.pm = pluggy.PluginManager("middle_agent")
        self.pm.add_hookspecs(hookspecs)
        trace.monitor(self.pm)  # MIDDLE_TRACE_HOOKS=1: calls through pm.hook.NAME(...) too
        for modname in DEFAULT_PLUGINS:
            self.pm.register(importlib.import_module(modname), name=modname)
        self.entry_points: dict[Any, PluginEntry] = {}  # plugin -> its entry point and package
        if load_entry_points:
            self.entry_points = _load_entry_points(self.pm, os.environ.get(LOAD_PLUGINS_VARIABLE))
        for plugin in extra_plugins:
            self.pm.register(plugin)

    # What the plugins register is collected on first use: the built-in plugins import their
    # backend classes (and with them NumPy, FAISS, SciPy) inside the hook, so a registry built
    # only for plugin commands (`middle --help`) stays light.
    @cached_property
    def backends(self) -> dict[str, Registered]:
        return self._collect("register_memory_backends", "name")

    @cached_property
    def coding_agents(self) -> dict[str, Registered]:
        return self._collect("register_coding_agents", "kind")

    @cached_property
    def ticket_sources(self) -> dict[str, Registered]:
        return self._collect("register_ticket_sources", "kind", "source")

    def _collect(self, hook: str, attr: str, what: str = "") -> dict[str, Registered]:
        """Call one registration hook of every plugin (traced); the core owns the register
        callback, which checks each class's `attr` and refuses duplicates."""
        table: dict[str, Registered] = {}
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            trace.call(hook, impl.plugin_name, impl.function,
                       {"register": self._registrar(table, impl.plugin_name, attr, what)})
        return table

    def source_class(self, kind: str) -> Any:
        if kind not in self.ticket_sources:
            raise ConfigError(
                f"unknown ticket source {kind!r}: choose one of {', '.join(sorted(self.ticket_sources))} "
                "([tickets] kind, or --from KIND:ARG), or install the plugin that provides it"
            )
        return self.ticket_sources[kind].cls

    def _registrar(self, table: dict[str, Registered], plugin: str, attr: str, what: str = ""):
        def register(cls: type) -> None:
            name = getattr(cls, attr, None)
            if not isinstance(name, str) or not _NAME.match(name):
                raise ConfigError(
                    f"plugin {plugin!r} registered {cls!r} with bad {attr} {name!r}: use a "
                    "lower-case identifier such as 'my_backend'"
                )
            if attr == "name" and not (isinstance(cls, type) and issubclass(cls, MemoryBackend)):
                raise ConfigError(
                    f"plugin {plugin!r} registered {cls!r}, which is not a subclass of "
                    "orchestrator.plugin_api.MemoryBackend"
                )
            if what == "source" and not (
                callable(getattr(cls, "open", None)) and isinstance(getattr(cls, "argument", None), str)
            ):
                raise ConfigError(
                    f"plugin {plugin!r} registered ticket source {cls!r} without an `open(options, "
                    "context)` classmethod or an `argument` name: see orchestrator/plugin_api.py TicketSource"
                )
            if (
                attr == "kind"
                and not what
                and not (hasattr(cls, "Options") and callable(getattr(cls, "run_turn", None)))
            ):
                raise ConfigError(
                    f"plugin {plugin!r} registered coding agent {cls!r} without an `Options` model or a "
                    "`run_turn` method: see orchestrator/coding_agent/base.py"
                )
            if name in table:
                raise ConfigError(
                    f"{attr} {name!r} is registered twice (by {table[name].plugin!r} and "
                    f"{plugin!r}): uninstall one of the two plugins"
                )
            table[name] = Registered(name, cls, plugin)
            if trace.tracing():
                trace.write(f"{plugin} registered {attr} {name!r}: {cls.__module__}.{cls.__qualname__}")

        return register

    def backend_class(self, name: str) -> type[MemoryBackend]:
        if name not in self.backends:
            raise ConfigError(
                f"unknown memory backend {name!r}: choose one of "
                f"{', '.join(sorted(self.backends))} (see `middle backends`), or install "
                "the plugin that provides it"
            )
        return self.backends[name].cls

    def backend_options(self, name: str, options: dict[str, Any]) -> BackendOptions:
        """Validate `[memory.options]` with the backend's strict model."""
        return _validated(self.backend_class(name).Options, options, f"[memory.options] for backend {name!r}")

    def coding_agent_options(self, kind: str, options: dict[str, Any], where: str = "[coding_agent.options]") -> Any:
        """Validate `[coding_agent.options]` (or `where`) with the coding agent kind's strict Options model."""
        cls = self.coding_agent_class(kind)
        return _validated(cls.Options, options, f"{where} for coding agent {kind!r}")

    def coding_agent_class(self, kind: str) -> Any:
        if kind not in self.coding_agents:
            raise ConfigError(
                f"unknown coding agent kind {kind!r}: choose one of {', '.join(sorted(self.coding_agents))}"
            )
        return self.coding_agents[kind].cls

    def plugin_rows(self) -> list[dict[str, str]]:
        """One row per loaded plugin: name, where it came from, and what hooks it implements."""
        rows = []
        for name, plugin in self.pm.list_name_plugin():
            entry = self.entry_points.get(plugin)
            source = f"{entry.dist} {entry.version} (entry point)" if entry else "built-in"
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
            where = getattr(plugin, "__file__", None) or repr(plugin)
            rows.append({"name": name, "source": source, "hooks": ", ".join(hooks), "file": where})
        return rows

    @property
    def hook(self):
        return self.pm.hook


def check_options(config: Any) -> None:
    """Validate the config's `[coding_agent.options]` and `[memory.options]` (also with memory off, as
    `middle run` does): every command that loads the config refuses what `middle run` would."""
    reg = registry()
    reg.coding_agent_options(config.coding_agent.kind, config.coding_agent.options)
    for kind, options in config.coding_agents.items():  # the agents tickets may pick
        if kind not in reg.coding_agents:
            raise ConfigError(f"[coding_agents.{kind}] names no registered coding agent: choose one of "
                              f"{', '.join(sorted(reg.coding_agents))} (`middle agents` lists them)")
        reg.coding_agent_options(kind, options, f"[coding_agents.{kind}]")
    if config.memory.backend != "none" or config.memory.options:
        reg.backend_options(config.memory.backend, config.memory.options)


def _validated(model: Any, options: dict[str, Any] | None, what: str) -> Any:
    """Options through a strict pydantic model, any problem reworded as one actionable line."""
    from pydantic import ValidationError  # here: `middle --help` loads plugins, not pydantic

    try:
        return model(**(options or {}))
    except ValidationError as exc:
        parts = [f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()]
        fields = ", ".join(model.model_fields) or "none"
        raise ConfigError(f"bad {what}: {'; '.join(parts)}. Allowed options: {fields}") from None
    except TypeError as exc:
        raise ConfigError(f"bad {what}: {exc}") from None


def hook_keys(impls: list[Any]) -> list[tuple[Any, str]]:
    """Each implementation of a hook with its plugin's key, the same in every process that
    registers the same plugins in the same order (a run's end records its end hooks by it, and
    `middle sync` in another process skips the recorded ones: tickets/end_hooks.py). A named
    plugin's key is its name (a built-in's module, an entry point's name, a name given to
    `register`). pluggy names a plugin registered without one by its object's id, another in
    the next process: its key is its class's `module:qualname`, and the n-th plugin of a class
    so keyed is `module:qualname#n` (n >= 2), counted in the hook's order of implementations
    (registration order, tryfirst/trylast aside)."""
    keys: list[tuple[Any, str]] = []
    seen: dict[str, int] = {}
    for impl in impls:
        key = impl.plugin_name
        if key == str(id(impl.plugin)):  # pluggy's name for a plugin registered with none
            cls = type(impl.plugin)
            key = f"{cls.__module__}:{cls.__qualname__}"
            seen[key] = seen.get(key, 0) + 1
            key += f"#{seen[key]}" if seen[key] > 1 else ""
        keys.append((impl, key))
    return keys


def call_hook(hooks: Any, name: str, *, skip: Container[str] = (), ran: Callable[[str], None] | None = None,
              **kwargs: Any) -> None:
    """Call a lifecycle hook's implementations one by one: a plugin that raises is logged, and
    the other plugins' implementations still run (pluggy alone would stop at the first error).
    `skip`: plugin keys (hook_keys) not to call (their hook ran already); `ran(key)`: called after
    each plugin's hook returned or raised (a run's end records it: tickets/end_hooks.py)."""
    if hooks is None:
        return
    caller = getattr(hooks, name)
    for impl, key in reversed(hook_keys(caller.get_hookimpls())):  # pluggy's order: last registered first
        if impl.hookwrapper or impl.wrapper or key in skip:  # (no use for wrappers)
            continue
        try:
            trace.call(name, impl.plugin_name, impl.function, {arg: kwargs[arg] for arg in impl.argnames})
        except Exception:
            import logging

            logging.getLogger("middle.plugins").exception(
                "plugin %s raised in hook %s; the ticket goes on", impl.plugin_name, name
            )
        if ran is not None:
            ran(key)


def _load_entry_points(pm: pluggy.PluginManager, only: str | None) -> dict[Any, PluginEntry]:
    """Register the installed plugins (all, or those `only` names by entry point or package), as
    pluggy's load_setuptools_entrypoints would, from the remembered index (plugin_index); return
    each loaded plugin's entry (`middle plugins` shows its package)."""
    wanted = None if only is None else {name.strip() for name in only.split(",") if name.strip()}
    if wanted:  # a name no installed plugin has (a typo, a plugin not installed here) loads nothing, silently
        installed = installed_plugins()
        unknown = sorted(wanted - {e.name for e in installed} - {e.dist for e in installed})
        if unknown:
            have = ", ".join(sorted({e.dist for e in installed})) or "none"
            raise ConfigError(f"{LOAD_PLUGINS_VARIABLE} names {', '.join(unknown)}, which no installed plugin "
                              f"is (installed: {have}): fix the name, pip install the plugin, or unset "
                              f"{LOAD_PLUGINS_VARIABLE} to load every installed plugin")

    def keep(entry: PluginEntry) -> bool:
        return wanted is None or entry.name in wanted or entry.dist in wanted

    loaded: dict[Any, PluginEntry] = {}
    # Checked against the distributions' own metadata before anything is imported (index.verified).
    for entry in verified(tuple(e for e in installed_plugins() if keep(e)), keep):
        if pm.get_plugin(entry.name) is not None or pm.is_blocked(entry.name):
            continue  # the first distribution to declare a name wins, as in pluggy
        plugin = entry.load()
        pm.register(plugin, name=entry.name)
        loaded[plugin] = entry
    return loaded


_REGISTRY: PluginRegistry | None = None
_REGISTRY_LOCK = threading.Lock()


def registry() -> PluginRegistry:
    """The process's one plugin registry, loaded on first use and then shared (as simonw/llm's
    `load_plugins()`): the CLI, the services, the server and the benchmarks all use this one."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            _REGISTRY = PluginRegistry()
        return _REGISTRY
