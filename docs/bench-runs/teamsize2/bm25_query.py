"""A project's BM25 query on its memory store, timed: queries naming a word every doc holds
(as a ticket's recall does), and rare ones; the fastest and the median of 7 each.

    python docs/bench-runs/teamsize2/bm25_query.py path/to/middle.toml
"""

import statistics
import sys
import time

from orchestrator.config.settings import load_config
from orchestrator.services import Services

QUERIES = {
    "common (module, ticket, check)": "Module 41 login session ticket check",
    "every doc (ticket, task, changed, module, file, check, passes)":
        "Ticket Task changed module file check passes",
    "rare (a path, a number)": "src/f17.py 12345",
}


def main() -> None:
    services = Services(load_config(sys.argv[1], environ={}))
    with services.memory.using(services.config.project.id, "bench") as backend:
        store = backend._store  # the store's own BM25, as retrieve and explain call it
        measure(store)


def measure(store) -> None:
    store.bm25("warm up", 25)
    print(f"docs: {store.count()}")
    for name, query in QUERIES.items():
        spent = []
        for _ in range(7):
            started = time.perf_counter()
            store.bm25(query, 250)
            spent.append(time.perf_counter() - started)
        print(f"{name}: fastest {min(spent) * 1000:.1f} ms, median {statistics.median(spent) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
