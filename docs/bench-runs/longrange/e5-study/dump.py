# ruff: noqa  (a study script kept as it was run; not product code)
"""Replay a history through hybrid (or the spec named third: hybrid:embedder=e5); for each ticket with long-range relatives dump the dense and
BM25 lists (positions, scores) of its start query, top 300 each."""
import json, sys, time
from pathlib import Path
from orchestrator.bench import replay, ticket_data
from orchestrator.bench.runner import Bench

src, out = sys.argv[1], sys.argv[2]
spec_name = sys.argv[3] if len(sys.argv) > 3 else "hybrid"  # e.g. hybrid:embedder=e5
if src.endswith('.json'):
    h = ticket_data.load_ticket_file(Path(src)); tickets = replay.select(h, None, 1500)
else:
    tickets = ticket_data.load_git_repo(Path(src)).tickets
rel = replay.relevant_earlier(tickets); longs = replay.long_range(rel, 20)
bench = Bench([spec_name], Path('/tmp/lr4'))
spec = bench.specs[0]
rows = []
with bench.scratch() as tmp:
    b = bench.open(spec, tmp / 'store')
    pos_of = {}
    t0 = time.time()
    for pos, t in enumerate(tickets):
        if rel[pos]:
            q = t.start_query()
            with b._store.lock:
                b._store.sync()
                dense = b._dense(replay.__dict__.get('x', None) or __import__('backends').retrieval.bm25.without_paths(q), 300)
                sparse = b._store.bm25(q, 300)
            rows.append({'pos': pos, 'rel': sorted(rel[pos]), 'long': sorted(longs[pos]),
                         'dense': [(pos_of[i], s) for i, s in dense],
                         'sparse': [(pos_of[i], s) for i, s in sparse]})
        doc = t.completion_doc()
        b.index([doc])
        # map the new id
        with b._store.read() as conn:
            nid = conn.execute('select max(id) from docs').fetchone()[0]
        pos_of[nid] = pos
    b.close()
json.dump({'tickets': [{'title': t.title, 'desc': t.description, 'paths': t.paths, 'date': t.date, 'refs': t.refs} for t in tickets], 'rows': rows}, open(out, 'w'))
print('done', time.time() - t0, len(rows))
