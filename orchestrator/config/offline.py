"""Offline mode's constants: the key both the middle agent and Claude Code send to the local fake.

`Services(config, fake=True)` (and `middle run --fake`, `middle demo`) starts the built-in fake
Messages API on 127.0.0.1 and points both at it; see orchestrator/services.py.
"""

FAKE_API_KEY = "sk-fake-local"
