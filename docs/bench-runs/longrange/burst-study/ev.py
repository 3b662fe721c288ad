# ruff: noqa  (a study script kept as it was run; not product code)
import json, sys, math, re
from collections import defaultdict
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[4]))  # the repository root
from backends.retrieval import fusion
D = json.load(open(sys.argv[1] if len(sys.argv) > 1 else '/tmp/lr3/dev.json'))  # dump.py's output
T = D['tickets']; R = [r for r in D['rows'] if r['long']]
def related(row, rank):
    p = row['pos']
    return [i for i, _ in rank if not (p - 20 <= i < p)][:5]
def score(fn, rows=R):
    vals = []
    for row in rows:
        top = related(row, fn(row))
        vals.append(len(set(top) & set(row['long'])) / len(row['long']))
    return sum(vals) / len(vals), vals
def base(row, pool=75):
    return fusion.weighted_sum(row['dense'][:pool], row['sparse'][:pool], 0.5)[:pool]
if __name__ == '__main__':
    print('base', round(score(base)[0], 3), len(R))
