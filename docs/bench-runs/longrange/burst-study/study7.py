# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
import sqlite3
from backends.retrieval import bm25
PS = [set(t['paths']) for t in T]
def doc(t): return f"Ticket: {t['title']}. {t['desc']}. Changed: {', '.join(t['paths'])}"
con = sqlite3.connect(':memory:')
variants = {}
for W in (5, 10, 20):
    for paths in (True, False):
        name = f"x{W}{'p' if paths else 'a'}"
        con.execute(f"create virtual table {name} using fts5(text, tokenize='{bm25.FTS_TOKENIZE}')")
        rows = []
        for i, t in enumerate(T):
            mates = [m for m in range(max(0, i - W), min(len(T), i + W + 1)) if m != i and (not paths or PS[i] & PS[m])]
            extra = ' '.join(T[m]['title'] for m in mates)
            rows.append((i, bm25.fts_text(doc(t)) + '\n' + extra))
        con.executemany(f"insert into {name}(rowid, text) values (?, ?)", rows)
        variants[name] = True
def search(name, q, p, k=300):
    e = bm25.match_expression(q, True)
    if not e: return []
    return [(r, -s) for r, s in con.execute(f"select rowid, bm25({name}) from {name} where {name} match ? and rowid < ? order by bm25({name}) limit ?", (e, p, k)).fetchall()]
cache = {}
for row in R:
    t = T[row['pos']]; q = f"{t['title']}. {t['desc']}"
    for name in variants: cache[(name, row['pos'])] = search(name, q, row['pos'])
def three(name, w, pool=75, dw=0.5):
    def fn(row):
        d = fusion.min_max(row['dense'][:pool]); s = fusion.min_max(row['sparse'][:pool]); x = fusion.min_max(cache[(name, row['pos'])][:pool])
        keys = d.keys() | s.keys() | x.keys()
        f = {i: dw * d.get(i, 0) + (1 - dw) * ((1 - w) * s.get(i, 0) + w * x.get(i, 0)) for i in keys}
        return sorted(f.items(), key=lambda z: (-z[1], z[0]))
    return fn
b = score(base)[1]
for name in variants:
    out = []
    for w in (0.25, 0.5, 0.75, 1.0):
        m, v = score(three(name, w))
        up = sum(x > y for x, y in zip(v, b)); dn = sum(x < y for x, y in zip(v, b))
        out.append(f"{w}:{m:.3f}({up}/{dn})")
    print(name, ' '.join(out))
