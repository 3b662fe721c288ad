"""The tables of docs/memory-benchmarks.md's "Bursts" section from run-burst.sh's --json files
(burst-NAME.json): per history its rows with count and 95% interval, then the held-out histories
pooled (every long-range ticket joined) and the paired per-ticket differences.
Usage: python docs/bench-runs/longrange/burst_tables.py dev datasette-last1500 sqlite-utils llm click
(the first name is shown alone; the others are pooled)."""
import json
import sys
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent
OFF, ON = "hybrid:burst_weight=0", "hybrid:burst_weight=0.2"
ROWS = ["bm25", "bm25 (related)", "bm25 (block)", f"{OFF} (related)", f"{ON} (related)",
        f"{OFF} (block)", f"{ON} (block)", OFF, ON]
PAIRS = [(f"{ON} (related)", "bm25"), (f"{ON} (related)", "bm25 (related)"),
         (f"{ON} (block)", "bm25"), (f"{ON} (block)", "bm25 (block)"),
         (f"{OFF} (related)", "bm25"), (f"{ON} (related)", f"{OFF} (related)"),
         (f"{ON} (block)", f"{OFF} (block)"), (ON, OFF)]


def rows(name):
    data = json.loads((HERE / f"burst-{name}.json").read_text())
    return {r["backend"]: r for r in data["results"] if r["query"] in ("start",)}, data


def cell(values):
    lo, hi = interval95(values)
    return f"{mean(values):.3f} ({lo:.3f} to {hi:.3f})"


def show(name):
    table, data = rows(name)
    print(f"\n{name}: {data['tickets']} tickets, {data['scored']} scored, {data['long_scored']} long-range")
    print("| backend (start query) | R@5 | long R@5 (95% interval) | long hit@5 | retrieve CPU p95 ms |")
    print("|---|---|---|---|---|")
    for key in ROWS:
        r = table[key]
        print(f"| {key} | {r['recall@5']:.3f} | {cell(r['long_recall@5_per_ticket'])} | "
              f"{r['long_hit@5']:.3f} | {r['retrieve_cpu_p95_ms']:.1f} |")
    return table


def pairs(per, n_label):
    print(f"\n| difference, per ticket ({n_label}) | mean (95% interval) | up / down |")
    print("|---|---|---|")
    for ours, base in PAIRS:
        diff = [a - b for a, b in zip(per[ours], per[base])]
        lo, hi = interval95(diff)
        up, down = sum(d > 0 for d in diff), sum(d < 0 for d in diff)
        print(f"| {ours} − {base} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) | {up} / {down} |")


def pooled(names):
    tables = [show(n) for n in names]
    per = {key: sum((t[key]["long_recall@5_per_ticket"] for t in tables), []) for key in ROWS}
    print(f"\npooled over {', '.join(names)}: {len(per[ROWS[0]])} long-range tickets")
    print("| backend | long R@5 (95% interval) |")
    print("|---|---|")
    for key in ROWS:
        print(f"| {key} | {cell(per[key])} |")
    pairs(per, f"pooled, {len(per[ROWS[0]])} tickets")
    for name, t in zip(names, tables):
        print(f"\n{name}:")
        pairs({key: t[key]["long_recall@5_per_ticket"] for key in ROWS}, name)


if __name__ == "__main__":
    first, *held_out = sys.argv[1:]
    table = show(first)
    pairs({key: table[key]["long_recall@5_per_ticket"] for key in ROWS}, first)
    if held_out:
        pooled(held_out)
