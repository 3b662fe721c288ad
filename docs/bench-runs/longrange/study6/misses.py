# ruff: noqa  (a study script kept as it was run; not product code)
"""Error analysis of the sixth try (development split ONLY): every long-range relative the
default's related list misses at 5, what the query shares with it and what outranks it.
Reads burst-study/dump.py's output for the development split (`--before-last 1500` of
datasette: the dense and BM25 lists, top 300 each, of every scored ticket's start query); the
related list is rebuilt as the bench builds it (weighted 0.5, pool 75, the newest 20 left out)."""
import json, math, re, sys
from collections import Counter, defaultdict
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from backends.retrieval import fusion

D = json.load(open(sys.argv[1] if len(sys.argv) > 1 else '/tmp/lr3/dev.json'))
T = D['tickets']
R = [r for r in D['rows'] if r['long']]
STOP = set('a an the and or of to in on for with by is it this that be as at from into not no now '
           'are was were can use used using when if then than so its also new add added adds fix '
           'fixed fixes fixing support update updated remove removed ticket changed refs ref see '
           'closes should more all only but which via docs doc test tests'.split())
WORD = re.compile(r'[a-z_][a-z0-9_]+')

def words(text):
    return {w for w in WORD.findall(text.lower()) if w not in STOP and len(w) > 2}

def text_of(t):
    return f"{t['title']}. {t['desc']}"

# document frequency over the stored tickets' prose, for "rare" shared words
df = Counter()
for t in T:
    df.update(words(text_of(t)))
N = len(T)

def fused(row, pool=75):
    return fusion.weighted_sum(row['dense'][:pool], row['sparse'][:pool], 0.5)[:pool]

def related(row, ranking, k=5):
    p = row['pos']
    return [i for i, _ in ranking if not (p - 20 <= i < p)][:k]

def rank_in(ranking, i):
    for n, (j, _) in enumerate(ranking):
        if j == i:
            return n
    return None

by_ref = defaultdict(list)  # ref -> positions, in order
for pos, t in enumerate(T):
    for ref in t['refs']:
        by_ref[ref].append(pos)

def group_size(ref, before):
    return sum(1 for p in by_ref[ref] if p < before)

cls = Counter(); cross = Counter(); outr = Counter(); found = 0; total = 0
gaps = defaultdict(list); lines = []
for row in R:
    q = row['pos']; qt = T[q]; qw = words(text_of(qt))
    rank = fused(row)
    top25 = [i for i, _ in rank[:25]]            # what hybrid's retrieve returns for the block
    shown = related(row, rank)
    for l in row['long']:
        total += 1
        if l in shown:
            found += 1
            continue
        lt = T[l]; lw = words(text_of(lt))
        shared = qw & lw
        rare = {w for w in shared if df[w] <= 0.01 * N}
        refs = set(qt['refs']) & set(lt['refs'])
        gsize = max(group_size(r, q) for r in refs)
        files = set(qt['paths']) & set(lt['paths'])
        fr = rank_in(rank, l); big = fusion.weighted_sum(row['dense'], row['sparse'], 0.5)
        br = rank_in(big, l)
        tiny = len(lw) <= 3
        # a doc hybrid's retrieve returns (its 25, the newest 20 included) that carries one of
        # the relative's refs: the relative is one hop from what the query already finds
        hop = [m for m in top25 if m != l and set(T[m]['refs']) & set(lt['refs'])]
        hop_q = [m for m in hop if set(T[m]['refs']) & set(qt['refs'])]
        if tiny:
            c = 'A relative has (almost) no prose (<=3 content words)'
        elif not shared:
            c = 'B no content word shared with the query'
        elif fr is not None:
            c = 'C shares words, in the fused pool (top 75), below 5'
        elif br is not None and br < 300:
            c = 'D shares words, below the pool (76-300 of a list)'
        else:
            c = 'E shares words, in neither list\'s top 300'
        cls[c] += 1
        gap = q - l
        gaps[c].append(gap)
        if rare: cross['shares a rare word (df <= 1%)'] += 1
        if files: cross['query\'s own commit touched one of its files (not known at start)'] += 1
        if gsize >= 10: cross['linked through an umbrella ref (>= 10 earlier tickets on it)'] += 1
        if hop: cross['one ref-hop from a doc in hybrid\'s top 25 (any of its refs)'] += 1
        if hop_q: cross['... through a doc that is itself the query\'s relative'] += 1
        if any(m >= q - 20 for m in hop_q): cross['... that doc among the newest 20 (the window)'] += 1
        if gap > 200: cross['over 200 tickets back'] += 1
        elif gap > 60: cross['61 to 200 tickets back'] += 1
        else: cross['21 to 60 tickets back'] += 1
        # what outranks it: the five shown
        for m in shown:
            if m in row['rel']:
                outr['another relative of the query (long-range)'] += 1
            elif set(T[m]['paths']) & set(lt['paths']) and abs(m - l) <= 20:
                outr['a burst-mate of the missed one (shares a file, <=20 apart)'] += 1
            elif set(T[m]['paths']) & set(qt['paths']):
                outr['unrelated by refs, touches a file the query\'s commit touches'] += 1
            elif not T[m]['refs']:
                outr['unrelated by refs, no refs at all'] += 1
            else:
                outr['unrelated, another issue\'s ticket'] += 1
        lines.append(f"{q}->{l} gap {gap} {c[:1]} rank {fr} shared {sorted(shared)[:6]} rare {sorted(rare)[:4]} "
                     f"refgroup {gsize} hop {len(hop)}/{len(hop_q)} | Q: {qt['title'][:60]} | L: {lt['title'][:60]}")

print(f'{total} long-range relatives of {len(R)} tickets; the related list finds {found}, misses {total - found}')
print('\n## classes of the missed (exclusive, first that holds)')
for c in sorted(cls):
    g = sorted(gaps[c]); print(f'{cls[c]:4d}  {c}  (median gap {g[len(g)//2]})')
print('\n## cross-cuts of the missed (not exclusive)')
for c, n in cross.most_common():
    print(f'{n:4d}  {c}')
print('\n## what the five shown are, summed over the misses (5 per miss)')
for c, n in outr.most_common():
    print(f'{n:4d}  {c}')
if '-v' in sys.argv:
    print('\n'.join(lines))
