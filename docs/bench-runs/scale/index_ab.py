"""Index 600 MuSiQue-shaped docs into a fresh store of one backend (argv[1]), cold embedding
cache, with the code of the checkout AB_ROOT names (the venv's editable install bypassed): the
model passes of an import, for a paired A/B of two commits.

    git worktree add /tmp/old <older commit>
    farm-bench -n 5 --timeout 600 \\
      --vs "sh -c 'AB_ROOT=/tmp/old exec python docs/bench-runs/scale/index_ab.py hindsight'" \\
      -- sh -c "AB_ROOT=$PWD exec python docs/bench-runs/scale/index_ab.py hindsight"

MUSIQUE: the corpus folder (default ../shared/data/musique100).
"""

import importlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = os.environ["AB_ROOT"]
DOCS, BATCH = 600, 200


def main() -> None:
    # The checkout's packages, not the venv's editable ones: its finder goes, the root goes first.
    sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f)]
    sys.path.insert(0, ROOT)
    tmp = tempfile.mkdtemp()
    os.environ["MIDDLE_AGENT_CACHE_DIR"] = tmp + "/cache"  # cold: every doc is read by the model
    datasets = importlib.import_module("orchestrator.bench.datasets")
    runner = importlib.import_module("orchestrator.bench.runner")
    assert datasets.__file__.startswith(ROOT), datasets.__file__
    data = datasets.load_retrieval(Path(os.environ.get("MUSIQUE", "../shared/data/musique100")))
    docs = datasets.synthetic_docs(data.passages, DOCS)
    bench = runner.Bench([sys.argv[1]], Path(tmp), runner.no_progress)
    with bench.scratch() as where:
        backend = bench.open(bench.specs[0], where / "store")
        for start in range(0, DOCS, BATCH):
            backend.index(docs[start:start + BATCH])
        backend.close()


if __name__ == "__main__":
    main()
