"""Registers the hybrid backend through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl


@hookimpl
def register_memory_backends(register):
    from .backend import HybridBackend  # imported when the registry collects backends

    register(HybridBackend)
