# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
import statistics
def rk(lst, i):
    for n, (j, _) in enumerate(lst):
        if j == i: return n
    return None
cnt = defaultdict(int); n=0
for row in R:
    top = related(row, base(row))
    for l in row['long']:
        n+=1
        found = l in top
        dr, sr = rk(row['dense'], l), rk(row['sparse'], l)
        fr = rk(base(row, 300), l)
        cat = 'found' if found else ('fused<75' if fr is not None and fr < 75 else ('in300' if (dr is not None or sr is not None) else 'none'))
        cnt[cat]+=1
        # mate of l in top5?
        P = set(T[l]['paths'])
        mate = any(abs(m - l) <= 20 and (set(T[m]['paths']) & P) for m in top)
        cnt[cat + (' mate-in-top5' if mate else '')] += 0
        if not found and mate: cnt['missed but mate in top5'] += 1
        if not found and any(abs(m-l)<=20 for m in top): cnt['missed but near(20) in top5'] += 1
print(n, dict(cnt))
