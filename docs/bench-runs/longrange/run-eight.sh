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
# 2. The six held-out histories, once, because the development split met plan8.md's rule (the
#    related list's long R@5 0.436 -> 0.495, +0.059, paired interval -0.019 to +0.133, 13 tickets
#    up, 2 down; whole R@5 start 0.439 -> 0.447, block 0.877 -> 0.878). The clones: the `fetch`
#    tool's snapshots (no internet here), `git clone -q --no-checkout` into $R and
#    `git reset -q --soft` to run-seven.sh's snapshot shas (all present).
#    As run: the machine was at a load of 14 to 20 (2 cores), and each history embedded its docs
#    cold (the embedding cache was new that morning). pytest and black were started at 11:08 UTC,
#    datasette --last 1500 at 11:23 in a stream of its own (behind black it would have started
#    too late); pytest and black ended 11:53, datasette 11:55; click, sqlite-utils and llm were
#    started at 11:56, all three at once.
R=${R:-/tmp/lr8}
for spec in pytest:df87db7b0462 black:8947c48ef207 click:2c8cd3ac958a sqlite-utils:56dd09702fdb llm:f3f4f29c6e5e; do
  n=${spec%:*}; git -C $R/$n reset -q --soft ${spec#*:}
done
nice -n 5 middle bench tickets --repo $R/pytest --last 1500 $B > $O/eight-pytest.json &
nice -n 5 middle bench tickets --repo $R/black --last 1500 $B > $O/eight-black.json &
nice -n 5 middle bench tickets --dataset $D --last 1500 $B > $O/eight-datasette-last1500.json &
wait
for n in click sqlite-utils llm; do nice -n 5 middle bench tickets --repo $R/$n $B > $O/eight-$n.json & done
wait
python $O/eight_tables.py pytest black click sqlite-utils llm datasette-last1500
