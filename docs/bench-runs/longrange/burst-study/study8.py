# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
def rk(lst, i):
    for n, (j, _) in enumerate(lst):
        if j == i: return n
    return 999
def fz(method, dw, pool=75):
    return lambda row: fusion.fuse(method, row['dense'][:pool], row['sparse'][:pool], dw)[:pool]
b = score(base)[1]
for method in ('weighted', 'relative', 'rrf'):
    for dw in (0.3, 0.4, 0.5, 0.6, 0.7):
        for pool in (75, 150):
            m, v = score(fz(method, dw, pool))
            print(method, dw, pool, round(m, 3), sum(x > y for x, y in zip(v, b)), sum(x < y for x, y in zip(v, b)))
# rank distribution for relatives (excluding window)
import collections
c = collections.Counter()
for row in R:
    p = row['pos']
    D = [x for x in row['dense'] if not p-20 <= x[0] < p]; S = [x for x in row['sparse'] if not p-20 <= x[0] < p]
    for l in row['long']:
        dr, sr = rk(D, l), rk(S, l)
        c[('d<5' if dr < 5 else 'd<20' if dr < 20 else 'd<75' if dr < 75 else 'd-'), ('s<5' if sr < 5 else 's<20' if sr < 20 else 's<75' if sr < 75 else 's-')] += 1
for k, v in sorted(c.items()): print(k, v)
