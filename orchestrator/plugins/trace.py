"""Hook-call tracing to stderr, switched on by MIDDLE_TRACE_HOOKS=1 (as pluggy's enable_tracing)."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import pluggy

from orchestrator.names import TRACE_HOOKS_VARIABLE

PREFIX = "middle hook:"


def tracing() -> bool:
    """Whether hook calls are traced; read at each call, so a test or a shell can switch it."""
    return os.environ.get(TRACE_HOOKS_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def _short(value: Any) -> str:
    # A Ticket or TurnRecord repr runs to pages: its start names what it is (and the ticket's id).
    return _cut(getattr(value, "__name__", "callable") if callable(value) else repr(value))


def _cut(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _args(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())


def write(line: str) -> None:
    sys.stderr.write(f"{PREFIX} {line}\n")
    sys.stderr.flush()


def call(hook: str, plugin: str, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call one plugin's implementation of `hook`, tracing the call and its outcome when asked."""
    if not tracing():
        return function(**kwargs)
    write(f"{hook} -> {plugin}({_args(kwargs)})")
    try:
        result = function(**kwargs)
    except BaseException as exc:
        write(f"{hook} <- {plugin} raised {type(exc).__name__}: {_cut(str(exc))}")
        raise
    write(f"{hook} <- {plugin} returned {_short(result)}")
    return result


def monitor(pm: pluggy.PluginManager) -> None:
    """Trace the calls made through `pm.hook.NAME(...)` too (pluggy's add_hookcall_monitoring)."""

    def before(hook: str, impls: Any, kwargs: Any) -> None:
        if tracing():
            names = ", ".join(impl.plugin_name for impl in impls) or "no plugin"
            write(f"{hook} -> [{names}]({_args(dict(kwargs))})")

    def after(outcome: Any, hook: str, impls: Any, kwargs: Any) -> None:
        if not tracing():
            return
        if outcome.exception is not None:
            exc = outcome.exception
            write(f"{hook} <- raised {type(exc).__name__}: {_cut(str(exc))}")
        else:
            write(f"{hook} <- returned {_short(outcome.get_result())}")

    pm.add_hookcall_monitoring(before, after)
