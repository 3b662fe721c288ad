"""`middle init`: a starter config and ticket folder in the current directory."""

from __future__ import annotations

from pathlib import Path

STARTER_CONFIG = """\
# middle-agent configuration (see README.md). Secrets come from the environment only.
[agent]
model = "claude-sonnet-5-5"
max_turns = 20
max_cost_usd = 5.0

[worker]
kind = "claude-code"
permission_mode = "acceptEdits"

[memory]
save_dir = ".middle/memory"     # remove (and unset MEMORY_SAVE_DIR) to run without memory
backend = "{backend}"
num_to_retrieve = 5

[memory.options]                # validated by the chosen backend (`middle backends`)

[project]
path = "."
tickets_dir = "tickets"
"""

STARTER_TICKET = """\
---
title: Add a hello module
project: {project}
---
Create `hello.py` with:
```python
def hello(name: str) -> str:
    return f"Hello, {{name}}!"
```
"""


def write_starter(root: Path, backend: str) -> list[Path]:
    """Write middle.toml and tickets/hello.md, never overwriting an existing file."""
    written = []
    config = root / "middle.toml"
    if not config.exists():
        config.write_text(STARTER_CONFIG.format(backend=backend), encoding="utf-8")
        written.append(config)
    ticket = root / "tickets" / "hello.md"
    if not ticket.exists():
        ticket.parent.mkdir(parents=True, exist_ok=True)
        project = "".join(c if c.isalnum() or c in "._-" else "-" for c in root.resolve().name).lstrip(".") or "project"
        ticket.write_text(STARTER_TICKET.format(project=project), encoding="utf-8")
        written.append(ticket)
    return written
