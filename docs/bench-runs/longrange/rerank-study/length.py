"""Why maxsim's block loses more than its related list (docs/memory-benchmarks.md, "Fifth try"):
MaxSim favours long docs. 150 development-split ticket docs and 30 start queries (seeded sample),
each read as hybrid's dense half reads it (prose, no paths): the rank correlation of each query's
scores with the docs' token counts, MaxSim against the one-vector cosine, and the mean length of
each query's top 5. Run after the benches, to explain, not to choose anything.
Usage: python docs/bench-runs/longrange/rerank-study/length.py ../shared/data/tickets/datasette.json"""
import random
import sys
from pathlib import Path

import numpy as np

from backends.retrieval.bm25 import without_paths
from backends.retrieval.chunking import PROSE, view_of
from backends.retrieval.embedders import make_embedder
from backends.retrieval.late import LateScorer
from orchestrator.bench import ticket_data


def rank_correlation(a, b):
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


def main():
    tickets = ticket_data.load_ticket_file(Path(sys.argv[1])).tickets[:-1500]  # --before-last 1500
    rng = random.Random(1)
    docs = [view_of(t.completion_doc(), PROSE) for t in rng.sample(tickets, 150)]
    queries = [without_paths(t.start_query()) for t in rng.sample(tickets, 30)]
    embedder = make_embedder("minilm")
    late = LateScorer(embedder)
    tokens = np.array([len(late.states(d)) for d in docs])
    vectors = embedder.embed_documents(docs)
    maxsim = np.array([late.scores(q, docs) for q in queries])
    cosine = np.array([vectors @ embedder.embed_query(q) for q in queries])
    print(f"doc tokens: median {np.median(tokens):.0f}, p90 {np.percentile(tokens, 90):.0f}")
    for name, scores in (("maxsim", maxsim), ("cosine", cosine)):
        corr = np.mean([rank_correlation(s, tokens) for s in scores])
        top = np.mean([np.mean([len(docs[i]) for i in np.argsort(-s)[:5]]) for s in scores])
        print(f"{name}: rank correlation with doc tokens {corr:+.2f}; chars of the top 5 {top:.0f}")
    print(f"all docs: {np.mean([len(d) for d in docs]):.0f} chars")


if __name__ == "__main__":
    main()
