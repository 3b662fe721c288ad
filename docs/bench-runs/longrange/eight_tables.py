"""The tables of docs/memory-benchmarks.md's "Eighth try: an issue thread scored as one
document": `hybrid:thread_docs=true` beside the default (`hybrid`), BM25 and the recent-only
baseline, all in one `middle bench tickets --doc-refs` run per history (run-eight.sh,
eight-NAME.json); the sixth try's tables (six_tables.py) on this try's runs, after the
recent-only row of each history (the trivial baseline: the newest tickets, no retrieval).
Usage: python docs/bench-runs/longrange/eight_tables.py dev       (the development split)
       python docs/bench-runs/longrange/eight_tables.py NAME...   (held-out histories, each and pooled)"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # run as a script beside six_tables.py

from six_tables import HERE, cell, tables  # noqa: E402


def recent_only(names):
    print("| history | recent-only R@5 (whole) | recent-only long R@5 |")
    print("|---|---|---|")
    for name in names:
        data = json.loads((HERE / f"eight-{name}.json").read_text())
        for row in data["results"]:
            if row["backend"].startswith("recent-only"):
                per = row.get("long_recall@5_per_ticket")
                long = cell(per) if per else f"{row['long_recall@5']:.3f}"
                print(f"| {name} ({row['backend']}) | {row['recall@5']:.3f} | {long} |")


if __name__ == "__main__":
    names = sys.argv[1:] or ["dev"]
    recent_only(names)
    tables("eight", "threads", "hybrid:thread_docs=true", names)
