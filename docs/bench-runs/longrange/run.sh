#!/bin/sh
# The runs of docs/memory-benchmarks.md (long range, issue 38), in order, from the repository root;
# R holds `git clone --no-checkout` copies of the three held-out repositories.
set -x
D=../shared/data/tickets/datasette.json
R=/tmp/longrange/repos
middle bench tickets --dataset $D --before-last 1500 --backend bm25 --backend hybrid --cached-embeddings --json > docs/bench-runs/longrange/dev.json
middle bench tickets --dataset $D --last 1500 --backend bm25 --backend hybrid --cached-embeddings --json > docs/bench-runs/longrange/datasette-last1500.json
for n in sqlite-utils llm click; do
  middle bench tickets --repo $R/$n --backend bm25 --backend hybrid --cached-embeddings --json > docs/bench-runs/longrange/$n.json
done
