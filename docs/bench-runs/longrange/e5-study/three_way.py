# ruff: noqa  (a study script; not product code)
"""The development split's related list (long R@5) from dump.py's lists: hybrid as the bench
ranks it (MiniLM + BM25; e5 + BM25) and the three lists fused with equal weights (min-max of
each list's top 75, as fusion.weighted_sum does for two).
Usage: python three_way.py /tmp/lr4/dev-minilm.json /tmp/lr4/dev-e5.json"""
import json, sys
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[4]))  # the repository root
from backends.retrieval import fusion
from orchestrator.bench.metrics import interval95, mean

A, B = (json.load(open(p)) for p in sys.argv[1:3])
assert [r['pos'] for r in A['rows']] == [r['pos'] for r in B['rows']]
rows = [(a, b) for a, b in zip(A['rows'], B['rows']) if a['long']]
POOL = 75

def related(pos, rank):
    return [i for i, _ in rank if not (pos - 20 <= i < pos)][:5]

def two(a):
    return fusion.weighted_sum(a['dense'][:POOL], a['sparse'][:POOL], 0.5)[:POOL]

def three(a, b):
    lists = [fusion.min_max(a['dense'][:POOL]), fusion.min_max(b['dense'][:POOL]), fusion.min_max(a['sparse'][:POOL])]
    ids = set().union(*lists)
    return sorted(((i, sum(l.get(i, 0.0) for l in lists) / 3) for i in ids), key=lambda x: (-x[1], x[0]))[:POOL]

def recall(pos, rank, longs):
    return len(set(related(pos, rank)) & set(longs)) / len(longs)

cols = {'minilm+bm25': [recall(a['pos'], two(a), a['long']) for a, b in rows],
        'e5+bm25': [recall(b['pos'], two(b), b['long']) for a, b in rows],
        'minilm+e5+bm25': [recall(a['pos'], three(a, b), a['long']) for a, b in rows]}
for k, v in cols.items():
    lo, hi = interval95(v)
    print(f"{k}: {mean(v):.3f} ({lo:.3f} to {hi:.3f}), n {len(v)}")
for k in ('e5+bm25', 'minilm+e5+bm25'):
    d = [x - y for x, y in zip(cols[k], cols['minilm+bm25'])]
    lo, hi = interval95(d)
    print(f"{k} − minilm+bm25: {mean(d):+.3f} ({lo:+.3f} to {hi:+.3f}), up {sum(x > 0 for x in d)} / down {sum(x < 0 for x in d)}")
