"""Registers the `none` backend (memory off) through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl


@hookimpl
def register_memory_backends(register):
    from .backend import NoneBackend  # imported when the registry collects backends

    register(NoneBackend)
