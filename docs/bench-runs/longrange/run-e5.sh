#!/bin/sh
# The runs of docs/memory-benchmarks.md's "Fourth try: a stronger embedder" (issue 38 item 5), in
# order, from the repository root. R holds `git clone --no-checkout` copies of the three --repo
# histories (the snapshots of run.sh and run-clean.sh: llm f3f4f29, sqlite-utils 56dd097, click
# 2c8cd3ac). The development split was run first; the held-out histories once, after.
set -x
D=../shared/data/tickets/datasette.json
R=/tmp/lr4/repos
O=docs/bench-runs/longrange
nice -n 5 middle bench tickets --dataset $D --before-last 1500 --backend bm25 --backend hybrid \
  --backend hybrid:embedder=e5 --backend dense --backend dense:embedder=e5 --cached-embeddings --json > $O/e5-dev.json
python $O/e5_tables.py dev
B="--backend bm25 --backend hybrid --backend hybrid:embedder=e5"
nice -n 5 middle bench tickets --dataset $D --last 1500 $B --cached-embeddings --json > $O/e5-datasette-last1500.json
for n in llm sqlite-utils click; do
  nice -n 5 middle bench tickets --repo $R/$n $B --cached-embeddings --json > $O/e5-$n.json
done
python $O/e5_tables.py
H="--backend hybrid --backend hybrid:embedder=e5"
nice -n 5 middle bench decisions $H --json > $O/e5-decisions.json
nice -n 5 middle bench retrieval $H --json > $O/e5-musique.json
nice -n 5 middle bench memory $H --json > $O/e5-locomo.json
