"""`middle memory ...` run as a real process in a project folder, for the memory CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def middle(root: Path, *args: str, ok: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`middle memory ARGS` in `root` with its own cache (and `env` on top of this process's);
    no traceback, and exit 0 exactly when `ok`."""
    extra = env or {}
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY")}
    env.update(extra)
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "memory", *args], cwd=root,
                         env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    assert (out.returncode == 0) == ok, (out.stdout, out.stderr)
    return out
