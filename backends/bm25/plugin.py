"""Registers the bm25 backend through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl


@hookimpl
def register_memory_backends(register):
    from .backend import Bm25Backend  # imported when the registry collects backends

    register(Bm25Backend)
