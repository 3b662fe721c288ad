# ruff: noqa  (a study script; not product code)
"""Why a better dense list need not make a better fused one: for each embedder's dump, the
related list's long R@5 of its dense list alone, of BM25 alone, and how many of the dense
list's 10 best (outside the window) BM25's 10 best share, over the 57 long-range tickets.
Usage: python overlap.py /tmp/lr4/dev-minilm.json /tmp/lr4/dev-e5.json"""
import json, sys

def outside(row, ranked, k):
    p = row['pos']
    return [i for i, _ in ranked if not (p - 20 <= i < p)][:k]

for path in sys.argv[1:]:
    rows = [r for r in json.load(open(path))['rows'] if r['long']]
    dense = sum(len(set(outside(r, r['dense'], 5)) & set(r['long'])) / len(r['long']) for r in rows) / len(rows)
    sparse = sum(len(set(outside(r, r['sparse'], 5)) & set(r['long'])) / len(r['long']) for r in rows) / len(rows)
    shared = sum(len(set(outside(r, r['dense'], 10)) & set(outside(r, r['sparse'], 10))) for r in rows) / len(rows)
    # relatives found by the dense list's 5 and not by BM25's 5: what the dense list adds
    adds = sum(len((set(outside(r, r['dense'], 5)) - set(outside(r, r['sparse'], 5))) & set(r['long'])) for r in rows)
    print(f"{path}: dense alone {dense:.3f}, bm25 alone {sparse:.3f}, shared of the 10 best {shared:.2f}, "
          f"relatives only the dense 5 find {adds}")
