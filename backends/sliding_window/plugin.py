"""Registers the sliding_window backend through the same hook a third-party plugin uses."""

from orchestrator.plugin_api import hookimpl


@hookimpl
def register_memory_backends(register):
    from .backend import SlidingWindowBackend  # imported when the registry collects backends

    register(SlidingWindowBackend)
