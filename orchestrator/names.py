"""Names the CLI shows before anything is loaded (kept light: `middle --help` imports no pydantic)."""

CONFIG_FILE = "middle.toml"
# The one default memory backend: `middle init`, `middle demo`, a config that names none.
DEFAULT_BACKEND = "hybrid"
# The entry-point group third-party plugins register under, and the variable that picks which
# of them load (unset: all; a comma-separated list of entry-point or package names; empty: none).
ENTRY_POINT_GROUP = "middle_agent"
LOAD_PLUGINS_VARIABLE = "MIDDLE_LOAD_PLUGINS"
# Set to 1 to print every hook call (which plugin, with what, what it returned) to stderr.
TRACE_HOOKS_VARIABLE = "MIDDLE_TRACE_HOOKS"

# A run's notes on indexing its completion doc (the graph says them; `middle log` reads the last
# one of a ticket to tell a doc in memory from one whose indexing failed).
INDEXED_NOTE = "indexed the ticket summary to project memory"
INDEX_FAILED_NOTE = "memory index failed"

# The run event recording each memory a recall showed the middle agent, and why:
# {"where": "ticket start" | "turn N", "backend", "memories": [{"id", "kind": "recent" | "related", "why"}]}.
RECALL_EVENT = "recall"
