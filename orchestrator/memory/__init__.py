"""The memory facade and what it owns: one store per project, locks, stores under every backend,
rebuilds, the "Memories invoked" text."""
