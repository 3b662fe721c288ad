# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
def smooth(W, lam, top, pool=75, norm=False):
    def fn(row):
        p = row['pos']
        f = base(row, pool)
        s = dict(f)
        new = dict(s)
        for d, sc in f[:top]:
            for m in range(max(0, d - W), min(p, d + W + 1)):
                if m != d:
                    new[m] = new.get(m, 0) + lam * sc
        return sorted(new.items(), key=lambda x: (-x[1], x[0]))
    return fn
b = score(base)[1]
for W in (3, 5, 10, 15, 20):
    for top in (5, 10, 20, 75):
        out = []
        for lam in (0.1, 0.2, 0.3, 0.4):
            m, v = score(smooth(W, lam, top))
            up = sum(x > y for x, y in zip(v, b)); dn = sum(x < y for x, y in zip(v, b))
            out.append(f"{lam}:{m:.3f}({up}/{dn})")
        print(W, top, ' '.join(out))
