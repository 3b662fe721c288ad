"""`middle bench words`: what one long word costs a backend, at two lengths (the ratio shows the
growth: about 10 for ten times the length when tokenising is linear, about 100 when quadratic)."""

from __future__ import annotations

import random
import string
import time
from typing import Any, Sequence

from .runner import Bench, Progress, no_progress

LENGTHS = (10_000, 100_000)
CONTEXT = ["Ticket: Fix the CSV export. Rows with commas in quoted fields were split in two.",
           "Ticket: Add a --port option to serve. The default 8001 clashed with another tool."]


def long_word(length: int, seed: int) -> str:
    """A run of `length` lower-case letters and digits: no separator for a tokenizer to stop at
    (a pasted hash dump or minified line), the worst case of an identifier pattern."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(length))


def run_long_words(backends: Sequence[str], *, lengths: Sequence[int] = LENGTHS,
                   progress: Progress = no_progress) -> dict[str, Any]:
    """Per backend and length: ms to index one doc holding one such word, and to retrieve with
    a query holding one; then the ratio of the longest length's times to the shortest's."""
    bench = Bench(backends, progress=progress)
    results = []
    advance = progress("long words", len(bench.specs) * len(lengths))
    for spec in bench.specs:
        with bench.scratch() as tmp:
            backend = bench.open(spec, tmp / "store")
            try:
                backend.index(CONTEXT)
                backend.retrieve(["warm-up query that loads the model"], 5)
                row: dict[str, Any] = {"backend": spec.label}
                for length in lengths:
                    doc = f"Ticket: Parser stalls on a pasted blob. {long_word(length, 1)} was the input."
                    query = f"why does {long_word(length, 2)} stall"
                    started = time.perf_counter()
                    backend.index([doc])
                    row[f"index_ms@{length}"] = (time.perf_counter() - started) * 1000
                    started = time.perf_counter()
                    backend.retrieve([query], 5)
                    row[f"retrieve_ms@{length}"] = (time.perf_counter() - started) * 1000
                    advance(1)
                low, high = min(lengths), max(lengths)
                for kind in ("index", "retrieve"):
                    row[f"{kind}_ratio"] = row[f"{kind}_ms@{high}"] / max(row[f"{kind}_ms@{low}"], 1e-6)
            finally:
                backend.close()
            results.append(row)
    return {"kind": "long words", "dataset": f"one word of {', '.join(f'{n:,}' for n in lengths)} "
            "characters", "lengths": list(lengths), "results": results}
