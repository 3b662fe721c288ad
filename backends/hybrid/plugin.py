"""Registers the hybrid backend through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl

from .backend import HybridBackend


@hookimpl
def register_memory_backends(register):
    register(HybridBackend)
