#!/bin/sh
# The runs of docs/memory-benchmarks.md's "Bursts" section (issue 38 item 5, burst_weight), in
# order, from the repository root; R holds `git clone --no-checkout` copies of the three
# held-out repositories (the same snapshots as run.sh's). burst_weight = 0.2 was chosen on the
# development split (the first run below, and a study of its related list); the held-out
# histories were run once, after.
set -x
D=../shared/data/tickets/datasette.json
R=/tmp/longrange/repos
O=docs/bench-runs/longrange
B="--backend bm25 --backend hybrid:burst_weight=0 --backend hybrid:burst_weight=0.2"
middle bench tickets --dataset $D --before-last 1500 $B --cached-embeddings --json > $O/burst-dev.json
middle bench tickets --dataset $D --last 1500 $B --cached-embeddings --json > $O/burst-datasette-last1500.json
for n in sqlite-utils llm click; do
  middle bench tickets --repo $R/$n $B --cached-embeddings --json > $O/burst-$n.json
done
