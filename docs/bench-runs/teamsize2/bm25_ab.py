"""PostgreSQL BM25 with each term's document frequency counted from its postings in the query (A,
before schema version 5) and read from retrieval_df (B), alternating on one store, 7 each;
the fastest and the median. The same ranked ids are asserted.

    python docs/bench-runs/teamsize2/bm25_ab.py path/to/middle.toml   # [memory] on PostgreSQL
"""

import statistics
import sys
import time

from backends.retrieval.pg_store import BM25
from orchestrator.config.settings import load_config
from orchestrator.services import Services

sys.path.insert(0, "tests/backends")
from test_pg_df import COUNTED, QUERIES  # noqa: E402

ASKED = {"common words (module, ticket, check) and rare ones": QUERIES[0],
         "words every doc holds": "Ticket Task changed module file check passes",
         "a path, a number": "src/f17.py 12345"}


def main() -> None:
    services = Services(load_config(sys.argv[1], environ={}))
    with services.memory.using(services.config.project.id, "bench") as backend:
        store = backend._store
        print(f"docs: {store.count()}")
        for name, query in ASKED.items():
            args = {"words": store.bm25_words(query), "store": store.store_id, "k": 250}
            spent: dict[str, list[float]] = {"A counted": [], "B retrieval_df": []}
            ranked = {}
            with store.read() as conn:
                for _ in range(7):
                    for label, sql in (("A counted", COUNTED), ("B retrieval_df", BM25)):
                        started = time.perf_counter()
                        ranked[label] = [row[0] for row in conn.execute(sql, args).fetchall()]
                        spent[label].append(time.perf_counter() - started)
            assert ranked["A counted"] == ranked["B retrieval_df"], name
            print(name + ": " + "; ".join(f"{label} fastest {min(t) * 1000:.0f} ms, median "
                                          f"{statistics.median(t) * 1000:.0f} ms" for label, t in spent.items()))


if __name__ == "__main__":
    main()
