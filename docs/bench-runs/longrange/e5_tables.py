"""The tables of docs/memory-benchmarks.md's "Fourth try: a stronger embedder" section: the e5
embedder (`hybrid:embedder=e5`) beside the default (`hybrid`, MiniLM) and BM25, each history's
three backends in one `middle bench tickets` run (run-e5.sh, e5-NAME.json).
Usage: python docs/bench-runs/longrange/e5_tables.py dev            (the development split)
       python docs/bench-runs/longrange/e5_tables.py                (the four held-out histories)"""
import json
import sys
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent
HELD_OUT = ["datasette-last1500", "sqlite-utils", "llm", "click"]
# (label, the run's backend row): start-query rankings and the default block's related list.
ROWS = [("bm25 start", "bm25"), ("bm25 (related)", "bm25 (related)"), ("bm25 (block)", "bm25 (block)"),
        ("hybrid start", "hybrid"), ("hybrid (related)", "hybrid (related)"), ("hybrid (block)", "hybrid (block)"),
        ("e5 start", "hybrid:embedder=e5"), ("e5 (related)", "hybrid:embedder=e5 (related)"),
        ("e5 (block)", "hybrid:embedder=e5 (block)"),
        ("dense start", "dense"), ("dense e5 start", "dense:embedder=e5")]
PAIRS = [("e5 (related)", "bm25 start"), ("e5 (related)", "bm25 (related)"),
         ("e5 (related)", "hybrid (related)"), ("e5 (block)", "hybrid (block)"),
         ("e5 start", "hybrid start"), ("hybrid (related)", "bm25 start"),
         ("dense e5 start", "dense start")]


def history(name):
    """{label: (per-ticket long R@5, the row)} of the run's start-query rows, and the run."""
    data = json.loads((HERE / f"e5-{name}.json").read_text())
    table = {r["backend"]: r for r in data["results"] if r["query"] == "start"}
    return {label: table[key] for label, key in ROWS if key in table}, data


def cell(values):
    lo, hi = interval95(values)
    return f"{mean(values):.3f} ({lo:.3f} to {hi:.3f})"


def main():
    names = sys.argv[1:] or HELD_OUT
    per_history = {}
    for name in names:
        rows, data = history(name)
        per_history[name] = {label: row["long_recall@5_per_ticket"] for label, row in rows.items()}
        print(f"\n{name}: {data['tickets']} tickets, {data['scored']} scored, {data['long_scored']} long-range")
        print("| row | R@5 (whole) | long R@5 (95% interval) | retrieve CPU p95 ms | index CPU p95 ms |")
        print("|---|---|---|---|---|")
        for label, row in rows.items():
            print(f"| {label} | {row['recall@5']:.3f} | {cell(row['long_recall@5_per_ticket'])} | "
                  f"{row['retrieve_cpu_p95_ms']:.1f} | {row['index_cpu_p95_ms']:.1f} |")
    labels = [label for label, _ in ROWS if all(label in per for per in per_history.values())]
    if len(names) > 1:
        print("\n| history | long n | " + " | ".join(labels) + " |")
        print("|---|---|" + "---|" * len(labels))
        for name, per in per_history.items():
            print(f"| {name} | {len(per['bm25 start'])} | " + " | ".join(cell(per[k]) for k in labels) + " |")
        pooled = {k: sum((per_history[n][k] for n in names), []) for k in labels}
        print(f"| **pooled** | {len(pooled['bm25 start'])} | " + " | ".join(cell(pooled[k]) for k in labels) + " |")
        per_history = {"pooled": pooled, **per_history}
    for name, per in per_history.items():
        print(f"\n| difference, per ticket ({name}, {len(per['bm25 start'])}) | mean (95% interval) | up / down |")
        print("|---|---|---|")
        for ours, base in PAIRS:
            if ours not in per or base not in per:
                continue
            diff = [a - b for a, b in zip(per[ours], per[base])]
            lo, hi = interval95(diff)
            print(f"| {ours} − {base} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) | "
                  f"{sum(d > 0 for d in diff)} / {sum(d < 0 for d in diff)} |")


if __name__ == "__main__":
    main()
