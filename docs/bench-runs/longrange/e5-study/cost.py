# ruff: noqa  (a study script; not product code)
"""CPU of each embedder, no cache: the first 300 datasette ticket docs (as hybrid embeds them:
prose, cut in windows) and their 300 start queries, one process, one embedder after the other.
Usage: python docs/bench-runs/longrange/e5-study/cost.py ../shared/data/tickets/datasette.json"""
import sys, time
from pathlib import Path
from backends.retrieval import embedders
from backends.retrieval.bm25 import without_paths
from backends.retrieval.chunking import chunks
from orchestrator.bench import ticket_data

tickets = ticket_data.load_ticket_file(Path(sys.argv[1])).tickets[:300]
for name in ("minilm", "e5"):
    model = embedders.make_embedder(name)
    model.embed_query("warm up")  # loading is not counted
    parts = [c for t in tickets for c in chunks(model, without_paths(t.completion_doc()))]
    start = time.process_time()
    model.embed_documents(parts)
    docs = time.process_time() - start
    start = time.process_time()
    for t in tickets:
        model.embed_query(without_paths(t.start_query()))
    queries = time.process_time() - start
    print(f"{name}: {len(parts)} windows of 300 docs {docs:.1f} s CPU ({1000 * docs / 300:.0f} ms a doc); "
          f"300 queries {queries:.1f} s CPU ({1000 * queries / 300:.0f} ms a query)")
