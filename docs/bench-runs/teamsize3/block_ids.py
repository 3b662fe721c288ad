"""The block's id lookups: one query for all the docs a block shows (MemoryBackend.docs_by_ids)
against one per doc (what the default docs_by_ids does, as the block did before), on SQLite and
on PostgreSQL (a pgserver started for the run), bm25 over N synthetic docs. Prints, per store,
the median and slowest of 20 lookups of the ids of 20 docs each (the docs of one recall).

    nice -n 5 python docs/bench-runs/teamsize3/block_ids.py N
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from backends.bm25.backend import Bm25Backend
from orchestrator.bench.memory_page import doc_text
from orchestrator.memory.facade import MemoryFacade
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.plugins.memory_backend import MemoryBackend
from orchestrator.testing import postgres

QUERIES = [f"Changed module m{i} and file src/f{i * 7}.py" for i in range(20)]


def measure(mem: MemoryFacade) -> dict[str, tuple[float, float]]:
    shown = [mem.retrieve("p", [q], 20)[0]["docs"] for q in QUERIES]
    out = {}
    batched = Bm25Backend.docs_by_ids
    for name in ("one query", "one per doc"):
        if name == "one per doc":
            Bm25Backend.docs_by_ids = MemoryBackend.docs_by_ids  # type: ignore[method-assign]
        mem.block_ids("p", shown[0])  # warm
        times = []
        for docs in shown:
            started = time.perf_counter()
            mem.block_ids("p", docs)
            times.append(time.perf_counter() - started)
        out[name] = (statistics.median(times), max(times))
    Bm25Backend.docs_by_ids = batched  # type: ignore[method-assign]
    return out


def main() -> None:
    n = int(sys.argv[1])
    docs = [doc_text(i) for i in range(n)]
    server = postgres.start_server()
    try:
        for where, url in (("SQLite", None), ("PostgreSQL", server.create_database())):
            with tempfile.TemporaryDirectory() as tmp:
                mem = MemoryFacade(Path(tmp), "bm25", {}, PluginRegistry(load_entry_points=False), url=url)
                started = time.perf_counter()
                for at in range(0, n, 5000):
                    mem.index("p", docs[at:at + 5000])
                print(f"{where}: {n} docs indexed in {time.perf_counter() - started:.0f} s")
                for name, (median, slowest) in measure(mem).items():
                    print(f"  {name}: median {median * 1000:.1f} ms, slowest {slowest * 1000:.1f} ms")
                mem.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
