#!/bin/sh
# Two held-out histories no one here had run or read before (2026-11-28): the rule that chose them
# was written before any retrieval run (docs/memory-benchmarks.md, "Two fresh held-out histories"):
# of six Python repositories whose commits name their own issues, those with at least 20
# long-range tickets in the replay (fresh_count.py, labels only). Run from the repository root.
set -x
R=${R:-/tmp/fresh}
O=docs/bench-runs/longrange
mkdir -p $R
for spec in pytest-dev/pytest@df87db7b0462 psf/black@8947c48ef207; do
  repo=${spec%@*}; sha=${spec#*@}; n=${repo#*/}
  [ -d $R/$n ] || git clone -q --no-checkout https://github.com/$repo $R/$n
  git -C $R/$n reset -q --soft $sha   # the snapshot measured (2026-08-20)
done
python $O/fresh_count.py $R/pytest $R/black $R/werkzeug $R/jinja $R/httpx   # the counts (clone those too)
for n in pytest black; do   # both over 2,000 commits: their newest 1,500, as datasette's held-out
  middle bench tickets --repo $R/$n --last 1500 --backend bm25 --backend hybrid --cached-embeddings --json > $O/fresh-$n.json
done
python $O/fresh_tables.py
