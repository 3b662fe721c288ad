"""Registers the bm25 backend through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl

from .backend import Bm25Backend


@hookimpl
def register_memory_backends(register):
    register(Bm25Backend)
