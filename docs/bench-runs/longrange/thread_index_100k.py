"""What thread_docs (on by default) costs a store of 100,000 docs, 30% of them naming one of
3,000 issues: the thread collection's first build (once per process), its update after one doc
is added (once per store change), and one query's thread list. Synthetic texts of 80 words;
seeded. Run from the repository root: python docs/bench-runs/longrange/thread_index_100k.py"""

import random
import time

from backends.retrieval import thread_docs

random.seed(3)
WORDS = "alpha beta gamma delta export csv table view plugin query facet column sort filter page".split()
texts = {i: " ".join(random.choice(WORDS) for _ in range(80))
         + (f" Issues: #{random.randint(1, 3000)}." if random.random() < 0.3 else "") for i in range(100_000)}
index = thread_docs.ThreadIndex()
start = time.perf_counter()
index.update("a", texts)
print(f"first build: {time.perf_counter() - start:.2f} s")
texts[100_000] = "A new doc. Issues: #5."
start = time.perf_counter()
index.update("b", texts)
print(f"after one doc added: {time.perf_counter() - start:.3f} s")
start = time.perf_counter()
found = index.thread_list("export csv facet", 75, {})
print(f"one query's thread list: {time.perf_counter() - start:.3f} s ({len(found.ranked)} docs)")
