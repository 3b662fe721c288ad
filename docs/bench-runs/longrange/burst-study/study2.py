# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
import itertools
PS = [set(t['paths']) for t in T]
df = defaultdict(int)
def mates_fn(W, paths=True, maxdf=None):
    def mates(d, p):
        out = []
        for m in range(max(0, d - W), min(p, d + W + 1)):
            if m == d: continue
            if paths:
                sh = PS[d] & PS[m]
                if not sh: continue
            out.append(m)
        return out
    return mates
def inherit(W, lam, paths=True, top=10, mode='max', pool=75):
    mates = mates_fn(W, paths)
    def fn(row):
        p = row['pos']
        f = base(row, pool)
        s = dict(f)
        new = dict(s)
        for d, sc in f[:top]:
            for m in mates(d, p):
                v = lam * sc
                if mode == 'max':
                    new[m] = max(new.get(m, 0), v)
                else:
                    new[m] = new.get(m, s.get(m, 0)) + v
        return sorted(new.items(), key=lambda x: (-x[1], x[0]))
    return fn
for W in (5, 10, 20, 40):
    for lam in (0.3, 0.5, 0.7, 0.9):
        for paths in (True, False):
            for mode in ('max', 'add'):
                print(W, lam, paths, mode, round(score(inherit(W, lam, paths, mode=mode))[0], 3))
