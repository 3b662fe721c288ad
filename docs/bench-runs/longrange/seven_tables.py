"""The tables of docs/memory-benchmarks.md's "Seventh try: the words a repository's own issue
threads teach": `hybrid:thread_expansion=true` beside the default (`hybrid`) and BM25, all in one `middle bench
tickets --doc-refs` run per history (run-seven.sh, seven-NAME.json); the sixth try's tables
(six_tables.py) on this try's runs.
Usage: python docs/bench-runs/longrange/seven_tables.py dev       (the development split)
       python docs/bench-runs/longrange/seven_tables.py NAME...   (held-out histories, each and pooled)"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run as a script beside six_tables.py

from six_tables import tables  # noqa: E402

if __name__ == "__main__":
    tables("seven", "words", "hybrid:thread_expansion=true", sys.argv[1:] or ["dev"])
