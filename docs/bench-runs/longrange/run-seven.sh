#!/bin/sh
# The runs of docs/memory-benchmarks.md's "Seventh try: the words a repository's own issue
# threads teach" (issue 38 item 5), in order, from the repository root. The plan with its
# decision rule (plan7.md) was committed before the first run.
# --doc-refs: each completion doc names its ticket's issues ("Issues: #12."), for every backend
# of the run; the start and turn queries never do.
set -x
D=../shared/data/tickets/datasette.json
O=docs/bench-runs/longrange
B="--doc-refs --backend bm25 --backend hybrid --backend hybrid:thread_expansion=true --cached-embeddings --json"
# 1. The development split, the one choice.
nice -n 5 middle bench tickets --dataset $D --before-last 1500 $B > $O/seven-dev.json
