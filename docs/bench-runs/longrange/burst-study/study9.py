# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
PS = [set(t['paths']) for t in T]
def smooth(W, lam, top, pool=75, old_only=False, paths=False):
    def fn(row):
        p = row['pos']
        f = base(row, pool)
        new = dict(f)
        src = [(d, sc) for d, sc in f if not (old_only and d >= p - 20)][:top]
        for d, sc in src:
            for m in range(max(0, d - W), min(p, d + W + 1)):
                if m != d and (not paths or PS[m] & PS[d]):
                    new[m] = new.get(m, 0) + lam * sc
        return sorted(new.items(), key=lambda x: (-x[1], x[0]))
    return fn
b = score(base)[1]
for old in (False, True):
  for W in (5, 10, 20, 40):
    for top in (5, 10):
        out = []
        for lam in (0.1, 0.2, 0.3, 0.5):
            m, v = score(smooth(W, lam, top, old_only=old, paths=True))
            up = sum(x > y for x, y in zip(v, b)); dn = sum(x < y for x, y in zip(v, b))
            out.append(f"{lam}:{m:.3f}({up}/{dn})")
        print('paths old' if old else 'paths all', W, top, ' '.join(out))
