"""middle-agent core: the ticket graph, the middle agent, the Claude Code worker, plugins, memory, CLI."""

__version__ = "0.1.0"
