"""Registers the dense backend through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl


@hookimpl
def register_memory_backends(register):
    from .backend import DenseBackend  # imported when the registry collects backends

    register(DenseBackend)
