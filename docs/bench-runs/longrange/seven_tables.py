"""The tables of docs/memory-benchmarks.md's "Seventh try: the words a repository's own issue
threads teach": `hybrid:thread_expansion=true` beside the default (`hybrid`) and BM25, all in one `middle bench
tickets --doc-refs` run per history (run-seven.sh, seven-NAME.json).
Usage: python docs/bench-runs/longrange/seven_tables.py dev       (the development split)
       python docs/bench-runs/longrange/seven_tables.py NAME...   (held-out histories, each and pooled)"""
import json
import sys
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent
# (label, the run's start-query row)
ROWS = [("bm25 start", "bm25"), ("bm25 (related)", "bm25 (related)"), ("bm25 (block)", "bm25 (block)"),
        ("hybrid start", "hybrid"), ("hybrid (related)", "hybrid (related)"), ("hybrid (block)", "hybrid (block)"),
        ("words start", "hybrid:thread_expansion=true"), ("words (related)", "hybrid:thread_expansion=true (related)"),
        ("words (block)", "hybrid:thread_expansion=true (block)")]
PAIRS = [("words (related)", "hybrid (related)"), ("words (block)", "hybrid (block)"),
         ("words start", "hybrid start"), ("words (related)", "bm25 start"),
         ("hybrid (related)", "bm25 start"), ("words (block)", "bm25 (block)")]


def history(name):
    data = json.loads((HERE / f"seven-{name}.json").read_text())
    table = {r["backend"]: r for r in data["results"] if r["query"] == "start"}
    return {label: table[key] for label, key in ROWS if key in table}, data


def cell(values):
    lo, hi = interval95(values)
    return f"{mean(values):.3f} ({lo:.3f} to {hi:.3f})"


def cpu(row):
    value = row.get("retrieve_cpu_p95_ms")
    return "" if value is None or value != value else f"{value:.1f} ms"


def differences(label, per):
    print(f"\n| difference, per ticket ({label}, {len(per['bm25 start'])}) | mean (95% interval) | up / down |")
    print("|---|---|---|")
    for a, b in PAIRS:
        diff = [x - y for x, y in zip(per[a], per[b])]
        lo, hi = interval95(diff)
        print(f"| {a} − {b} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) | "
              f"{sum(d > 0 for d in diff)} / {sum(d < 0 for d in diff)} |")


def main():
    names = sys.argv[1:] or ["dev"]
    per_history = {}
    for name in names:
        rows, data = history(name)
        per_history[name] = {label: row["long_recall@5_per_ticket"] for label, row in rows.items()}
        print(f"\n{name}: {data['tickets']} tickets, {data['scored']} scored, {data['long_scored']} long-range,"
              f" doc_refs {data.get('doc_refs')}")
        print("| row | R@5 (whole) | long R@5 (95% interval) | retrieve CPU p95 |")
        print("|---|---|---|---|")
        for label, row in rows.items():
            whole = "" if label.endswith("(related)") else f"{row['recall@5']:.3f}"
            print(f"| {label} | {whole} | {cell(row['long_recall@5_per_ticket'])} | {cpu(row)} |")
    if len(names) > 1:
        keys = [label for label, _ in ROWS]
        pooled = {k: sum((per_history[n][k] for n in names), []) for k in keys}
        shown = ["bm25 start", "hybrid (related)", "words (related)", "hybrid (block)", "words (block)"]
        print("\n| history | long n | " + " | ".join(shown) + " |")
        print("|---|---|" + "---|" * len(shown))
        for name, per in {**per_history, "pooled": pooled}.items():
            print(f"| {name} | {len(per['bm25 start'])} | " + " | ".join(cell(per[k]) for k in shown) + " |")
        per_history = {"pooled": pooled, **per_history}
    for name, per in per_history.items():
        differences(name, per)


if __name__ == "__main__":
    main()
