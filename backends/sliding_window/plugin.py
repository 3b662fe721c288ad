"""Registers the sliding_window backend through the same hook a third-party plugin uses."""

from orchestrator.plugin_api import hookimpl

from .backend import SlidingWindowBackend


@hookimpl
def register_memory_backends(register):
    register(SlidingWindowBackend)
