#!/bin/sh
# The three --repo held-out histories again, once another repository's issue URL is no ref
# (2026-11-28, orchestrator/bench/ticket_data.py), from the repository root; R holds
# `git clone --no-checkout` copies of the repositories (as run.sh).
set -x
R=/tmp/longrange/repos
O=docs/bench-runs/longrange
for n in llm sqlite-utils click; do
  middle bench tickets --repo $R/$n --backend bm25 --backend hybrid --backend hybrid:thread_weight=0.3 \
    --backend hybrid:burst_weight=0.2 --cached-embeddings --json > $O/clean-$n.json
done
python $O/clean_tables.py
