"""Registers the dense backend through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl

from .backend import DenseBackend


@hookimpl
def register_memory_backends(register):
    register(DenseBackend)
