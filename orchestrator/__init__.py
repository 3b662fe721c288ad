"""middle-agent core: the ticket graph, the middle agent, the coding agent, plugins, memory, CLI.

`from orchestrator import Orchestrator` is the Python API (orchestrator.running.orchestrator);
it is imported on first use, so `import orchestrator` stays light for the CLI."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Orchestrator", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Orchestrator":
        from orchestrator.running.orchestrator import Orchestrator

        return Orchestrator
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
