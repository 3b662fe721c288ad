"""Finding a CLI's executable: one rule for every coding agent and the CLI providers.

A configured name is looked up on PATH, and a configured path must be an executable file; either
way a configured one that is not found is reported, never quietly replaced by another on PATH."""

from __future__ import annotations

import os
import shutil


def find_executable(configured: str | None, default: str, *, path: str | None = None) -> str | None:
    """`configured` (else `default`): a name looked up on `path` (default: this process's PATH),
    or a path that must be an executable file. None when there is none (the caller says how to
    install it)."""
    name = configured or default
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=path)
