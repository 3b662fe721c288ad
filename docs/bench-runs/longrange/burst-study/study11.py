# ruff: noqa  (a study script kept as it was run; not product code)
import sys; sys.argv = ['x', '/tmp/lr3/dev2.json']
from ev import *
b = score(base)[1]
nodesc = [r for r in R]
def title_q(row, pool=75):
    return fusion.weighted_sum(row['dt'][:pool], row['st'][:pool], 0.5)[:pool]
def mix(w, pool=75):
    def fn(row):
        a = dict(base(row, pool)); t = dict(title_q(row, pool))
        f = {i: (1 - w) * a.get(i, 0) + w * t.get(i, 0) for i in a.keys() | t.keys()}
        return sorted(f.items(), key=lambda z: (-z[1], z[0]))
    return fn
for w in (0.25, 0.5, 0.75, 1.0):
    m, v = score(mix(w))
    print(w, round(m, 3), sum(x > y for x, y in zip(v, b)), sum(x < y for x, y in zip(v, b)))
print('with desc', sum(1 for r in R if D['tickets'][r['pos']]['desc']), len(R))
