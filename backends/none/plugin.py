"""Registers the `none` backend (memory off) through the memory-backend hook."""

from orchestrator.plugin_api import hookimpl

from .backend import NoneBackend


@hookimpl
def register_memory_backends(register):
    register(NoneBackend)
