"""The plugin module named by the `middle_agent` entry point: it registers the backend class."""

from orchestrator.plugin_api import hookimpl

from .backend import KeywordBackend


@hookimpl
def register_memory_backends(register):
    register(KeywordBackend)
