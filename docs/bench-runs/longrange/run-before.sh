#!/bin/sh
# The default before this change (thread_weight = 0) on the same held-out histories, after the
# held-out run above (no choice depends on it): what the change itself did there.
set -x
D=../shared/data/tickets/datasette.json
R=/tmp/longrange/repos
middle bench tickets --dataset $D --before-last 1500 --backend hybrid:thread_weight=0 --cached-embeddings --json > docs/bench-runs/longrange/dev-before.json
middle bench tickets --dataset $D --last 1500 --backend hybrid:thread_weight=0 --cached-embeddings --json > docs/bench-runs/longrange/datasette-last1500-before.json
for n in sqlite-utils llm click; do
  middle bench tickets --repo $R/$n --backend hybrid:thread_weight=0 --cached-embeddings --json > docs/bench-runs/longrange/$n-before.json
done
