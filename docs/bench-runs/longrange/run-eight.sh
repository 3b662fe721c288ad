#!/bin/sh
# The runs of docs/memory-benchmarks.md's "Eighth try: an issue thread scored as one document"
# (issue 38 item 5), in order, from the repository root. The plan with its decision rule
# (plan8.md) was committed before anything was built or run.
# --doc-refs: each completion doc names its ticket's issues ("Issues: #12."), for every backend
# of the run; the start and turn queries never do. The recent-only row comes with every run.
# nice -n 5: the machine is shared (2 cores, other helpers and CI).
set -x
D=${D:-/work/shared/data/tickets/datasette.json}
O=docs/bench-runs/longrange
B="--doc-refs --backend bm25 --backend hybrid --backend hybrid:thread_docs=true --cached-embeddings --json"
# 1. The development split, the one choice.
nice -n 5 middle bench tickets --dataset $D --before-last 1500 $B > $O/eight-dev.json
python $O/eight_tables.py dev
