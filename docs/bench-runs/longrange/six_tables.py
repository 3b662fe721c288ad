"""The tables of docs/memory-benchmarks.md's "Sixth try: a hop through the issues past tickets
name": `hybrid:issue_hop=true` beside the default (`hybrid`) and BM25, all in one `middle bench
tickets --doc-refs` run per history (run-issues.sh, six-NAME.json).
Usage: python docs/bench-runs/longrange/six_tables.py dev       (the development split)
       python docs/bench-runs/longrange/six_tables.py NAME...   (held-out histories, each and pooled)
`tables(prefix, short, backend)` prints the same tables for another try's runs (seven_tables.py)."""
import json
import sys
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent


def layout(short, backend):
    """(ROWS: (label, the run's start-query row), PAIRS: the per-ticket differences) of a try
    named `short` in the tables, run as `backend`."""
    rows = [("bm25 start", "bm25"), ("bm25 (related)", "bm25 (related)"), ("bm25 (block)", "bm25 (block)"),
            ("hybrid start", "hybrid"), ("hybrid (related)", "hybrid (related)"), ("hybrid (block)", "hybrid (block)"),
            (f"{short} start", backend), (f"{short} (related)", f"{backend} (related)"),
            (f"{short} (block)", f"{backend} (block)")]
    pairs = [(f"{short} (related)", "hybrid (related)"), (f"{short} (block)", "hybrid (block)"),
             (f"{short} start", "hybrid start"), (f"{short} (related)", "bm25 start"),
             ("hybrid (related)", "bm25 start"), (f"{short} (block)", "bm25 (block)")]
    return rows, pairs


def history(prefix, name, rows):
    data = json.loads((HERE / f"{prefix}-{name}.json").read_text())
    table = {r["backend"]: r for r in data["results"] if r["query"] == "start"}
    return {label: table[key] for label, key in rows if key in table}, data


def cell(values):
    lo, hi = interval95(values)
    return f"{mean(values):.3f} ({lo:.3f} to {hi:.3f})"


def cpu(row):
    value = row.get("retrieve_cpu_p95_ms")
    return "" if value is None or value != value else f"{value:.1f} ms"


def differences(label, per, pairs):
    print(f"\n| difference, per ticket ({label}, {len(per['bm25 start'])}) | mean (95% interval) | up / down |")
    print("|---|---|---|")
    for a, b in pairs:
        diff = [x - y for x, y in zip(per[a], per[b])]
        lo, hi = interval95(diff)
        print(f"| {a} − {b} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) | "
              f"{sum(d > 0 for d in diff)} / {sum(d < 0 for d in diff)} |")


def tables(prefix, short, backend, names):
    """The tables of the runs `{prefix}-{name}.json` of a try named `short`, run as `backend`."""
    layout_rows, pairs = layout(short, backend)
    per_history = {}
    for name in names:
        rows, data = history(prefix, name, layout_rows)
        per_history[name] = {label: row["long_recall@5_per_ticket"] for label, row in rows.items()}
        print(f"\n{name}: {data['tickets']} tickets, {data['scored']} scored, {data['long_scored']} long-range,"
              f" doc_refs {data.get('doc_refs')}")
        print("| row | R@5 (whole) | long R@5 (95% interval) | retrieve CPU p95 |")
        print("|---|---|---|---|")
        for label, row in rows.items():
            whole = "" if label.endswith("(related)") else f"{row['recall@5']:.3f}"
            print(f"| {label} | {whole} | {cell(row['long_recall@5_per_ticket'])} | {cpu(row)} |")
    if len(names) > 1:
        keys = [label for label, _ in layout_rows]
        pooled = {k: sum((per_history[n][k] for n in names), []) for k in keys}
        shown = ["bm25 start", "hybrid (related)", f"{short} (related)", "hybrid (block)", f"{short} (block)"]
        print("\n| history | long n | " + " | ".join(shown) + " |")
        print("|---|---|" + "---|" * len(shown))
        for name, per in {**per_history, "pooled": pooled}.items():
            print(f"| {name} | {len(per['bm25 start'])} | " + " | ".join(cell(per[k]) for k in shown) + " |")
        per_history = {"pooled": pooled, **per_history}
    for name, per in per_history.items():
        differences(name, per, pairs)


if __name__ == "__main__":
    tables("six", "hop", "hybrid:issue_hop=true", sys.argv[1:] or ["dev"])
