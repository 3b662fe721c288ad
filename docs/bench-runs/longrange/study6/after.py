# ruff: noqa  (a study script kept as it was run; not product code)
"""A reading AFTER the decision (plan6.md's rule said: not carried), not to choose anything:
why the issue hop lost as many tickets as it gained on the development split. Replays the hop
offline on burst-study/dump.py's lists (the refs read from the tickets, as `--doc-refs` puts
them in the docs; the lists themselves are from docs without refs, so the figures are close to
the bench's, not equal), and for each place the hop changed in a related list's first five says
who lent it: a relative of the query, or not."""
import json, sys
from collections import Counter
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from backends.retrieval import fusion, issues

D = json.load(open(sys.argv[1] if len(sys.argv) > 1 else '/tmp/lr3/dev.json'))
T = D['tickets']; R = [r for r in D['rows'] if r['long']]
by_issue = {}
for pos, t in enumerate(T):
    for ref in t['refs']:
        by_issue.setdefault(ref, []).append(pos)

def related(row, ranking):
    p = row['pos']
    return [i for i, _ in ranking if not (p - 20 <= i < p)][:5]

K, POOL = 25, 75
base_s, hop_s, c = [], [], Counter()
for row in R:
    q = row['pos']
    fused = fusion.weighted_sum(row['dense'][:POOL], row['sparse'][:POOL], 0.5)[:POOL]
    texts = {i: 'x ' + ' '.join(f'#{r}' for r in T[i]['refs']) for i, _ in fused[:K]}
    naming = lambda issue: [(p, ' '.join(f'#{r}' for r in T[p]['refs'])) for p in reversed(by_issue.get(issue, [])) if p < q][:POOL]
    hopped, why = issues.hop(fused, K, texts, naming)
    a, b = related(row, fused), related(row, hopped)
    long = set(row['long'])
    sa, sb = len(set(a) & long) / len(long), len(set(b) & long) / len(long)
    base_s.append(sa); hop_s.append(sb)
    c['up' if sb > sa else 'down' if sb < sa else 'same'] += 1
    for d in b:
        if d in a:
            continue
        src = why.get(d)
        right = d in row['rel']
        lender_right = src is not None and src[0] in row['rel']
        group = len([p for p in by_issue[src[1]] if p < q]) if src else 0
        c[f"new in the five: {'a relative' if right else 'NOT a relative'}, lent by "
          f"{'none (moved by RRF alone)' if src is None else ('a relative' if lender_right else 'a non-relative')}"] += 1
        if src and not right:
            c['... wrong ones through an issue of 10+ earlier tickets' if group >= 10 else '... wrong ones through a smaller issue'] += 1
        if src is not None and src[0] >= q - 20:
            c['(lender among the newest 20)'] += 1
print('offline related list long R@5: hybrid %.3f, hop %.3f' % (sum(base_s) / len(R), sum(hop_s) / len(R)))
for k, v in sorted(c.items()):
    print(f'{v:4d}  {k}')
