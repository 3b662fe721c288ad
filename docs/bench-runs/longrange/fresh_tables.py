"""The tables of docs/memory-benchmarks.md's "Two fresh held-out histories" section: pytest and
black (run-fresh.sh, fresh-NAME.json) beside the four held-out histories of "The held-out labels,
cleaned" (clean_tables.history), and all six pooled.
Usage: python docs/bench-runs/longrange/fresh_tables.py"""
import json
from pathlib import Path

from clean_tables import cell, differences, history  # type: ignore[import-not-found]  # (run from this folder's parent)

HERE = Path(__file__).parent
KEYS = ["bm25", "bm25 (related)", "bm25 (block)", "hybrid (related)", "hybrid (block)"]
PAIRS = [("hybrid (related)", "bm25"), ("hybrid (related)", "bm25 (related)"), ("hybrid (block)", "bm25"),
         ("hybrid (block)", "bm25 (block)")]


def fresh(name):
    data = json.loads((HERE / f"fresh-{name}.json").read_text())
    rows = {r["backend"]: r for r in data["results"] if r["query"] == "start"}
    recent = next(r for r in data["results"] if r["backend"].startswith("recent-only"))
    return {k: rows[k]["long_recall@5_per_ticket"] for k in KEYS}, data, recent


def main():
    per_history = {}
    print("| history | tickets | scored | long n | recent-only R@5 (all scored) | " + " | ".join(KEYS) + " |")
    print("|---|---|---|---|---|" + "---|" * len(KEYS))
    for name in ["pytest", "black"]:
        per, data, recent = fresh(name)
        per_history[name] = per
        print(f"| {name} `--last 1500` | {data['tickets']} | {data['scored']} | {data['long_scored']} | "
              f"{recent['recall@5']:.3f} | " + " | ".join(cell(per[k]) for k in KEYS) + " |")
    new = {k: sum((per_history[n][k] for n in per_history), []) for k in KEYS}
    print(f"| **the two pooled** | | | {len(new['bm25'])} | | " + " | ".join(cell(new[k]) for k in KEYS) + " |")
    for name in ["datasette-last1500", "sqlite-utils", "llm", "click"]:
        per, _ = history(name)
        per_history[name] = {k: per[k] for k in KEYS}
    every = {k: sum((per_history[n][k] for n in per_history), []) for k in KEYS}
    print(f"| **all six held-out pooled** | | | {len(every['bm25'])} | | "
          + " | ".join(cell(every[k]) for k in KEYS) + " |")
    for label, per in [("all six", every), ("the two fresh", new), ("pytest", per_history["pytest"]),
                       ("black", per_history["black"])]:
        differences(label, per, PAIRS)


if __name__ == "__main__":
    main()
