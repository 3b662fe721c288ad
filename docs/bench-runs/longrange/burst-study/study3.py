# ruff: noqa  (a study script kept as it was run; not product code)
from ev import *
import sqlite3
from backends.retrieval import bm25
con = sqlite3.connect(':memory:')
fields = {
 'title': lambda t: t['title'],
 'prose': lambda t: f"Ticket: {t['title']}. {t['desc']}",
}
for name, f in fields.items():
    con.execute(f"create virtual table {name} using fts5(text, tokenize='{bm25.FTS_TOKENIZE}')")
    con.executemany(f"insert into {name}(rowid, text) values (?, ?)", [(i, bm25.fts_text(f(t))) for i, t in enumerate(T)])
def search(name, q, p, k=300):
    e = bm25.match_expression(q, True)
    if not e: return []
    rows = con.execute(f"select rowid, bm25({name}) from {name} where {name} match ? and rowid < ? order by bm25({name}) limit ?", (e, p, k)).fetchall()
    return [(r, -s) for r, s in rows]
cache = {}
for row in R:
    t = T[row['pos']]; q = f"{t['title']}. {t['desc']}"
    for name in fields: cache[(name, row['pos'])] = search(name, q, row['pos'])
def three(name, w, pool=75, dw=0.5):
    def fn(row):
        d = fusion.min_max(row['dense'][:pool]); s = fusion.min_max(row['sparse'][:pool]); x = fusion.min_max(cache[(name, row['pos'])][:pool])
        keys = d.keys() | s.keys() | x.keys()
        f = {i: dw * d.get(i, 0) + (1 - dw) * ((1 - w) * s.get(i, 0) + w * x.get(i, 0)) for i in keys}
        return sorted(f.items(), key=lambda z: (-z[1], z[0]))
    return fn
for name in fields:
    for w in (0, 0.25, 0.5, 0.75, 1.0):
        print(name, w, round(score(three(name, w))[0], 3))
