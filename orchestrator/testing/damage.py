"""Damage a store file as faults do: emptied, cut short, or one 4 KiB block overwritten."""

from __future__ import annotations

import random
from pathlib import Path

DAMAGES = ("zero", "cut", "block")
BLOCK = 4096


def damage_file(path: Path, how: str) -> None:
    """Truncate path to zero bytes ("zero"), to half its size ("cut"), or overwrite the 4 KiB
    block holding its middle byte with garbage ("block"). The garbage is seeded by the file's
    name, so a test breaks the same bytes every run."""
    if how not in DAMAGES:
        raise ValueError(f"unknown damage {how!r}: one of {', '.join(DAMAGES)}")
    size = Path(path).stat().st_size
    with open(path, "r+b") as handle:
        if how == "zero":
            handle.truncate(0)
        elif how == "cut":
            handle.truncate(size // 2)
        else:  # for a file of several blocks, past its header (a FAISS index keeps it intact)
            handle.seek((size // 2) // BLOCK * BLOCK)
            handle.write(random.Random(f"{Path(path).name}-4k").randbytes(BLOCK))
