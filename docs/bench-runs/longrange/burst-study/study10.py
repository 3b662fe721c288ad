# ruff: noqa  (a study script kept as it was run; not product code)
from study9 import smooth, score, base, R, related
import collections
fn = smooth(10, 0.2, 10, paths=True)
c = collections.Counter()
for row in R:
    p = row['pos']; a = set(related(row, base(row))); b = set(related(row, fn(row)))
    for l in row['long']:
        bucket = '21-60' if p - l <= 60 else '61-200' if p - l <= 200 else '>200'
        c[(bucket, 'n')] += 1
        c[(bucket, 'base')] += l in a
        c[(bucket, 'burst')] += l in b
print(sorted(c.items()))
