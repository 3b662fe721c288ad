"""The tables of docs/memory-benchmarks.md's "Held-out labels cleaned" section: the three --repo
histories re-run with another repository's issue URLs no longer refs (run-clean.sh, clean-NAME.json),
beside datasette --last 1500 (its shared export's labels were already clean: its rows come from
burst-datasette-last1500.json, and the thread row from datasette-last1500.json, same tickets, same order).
Usage: python docs/bench-runs/longrange/clean_tables.py"""
import json
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent
KEYS = ["bm25", "bm25 (related)", "bm25 (block)", "hybrid (related)", "hybrid (block)",
        "thread (related)", "burst (related)"]
PAIRS = [("hybrid (related)", "bm25"), ("hybrid (related)", "bm25 (related)"), ("hybrid (block)", "bm25"),
         ("hybrid (block)", "bm25 (block)"), ("thread (related)", "hybrid (related)"),
         ("burst (related)", "hybrid (related)"), ("thread (related)", "bm25")]


def start_rows(name):
    data = json.loads((HERE / name).read_text())
    return {r["backend"]: r for r in data["results"] if r["query"] == "start"}, data


def history(name):
    """{key: per-ticket long R@5}, and the run's counts."""
    if name == "datasette-last1500":
        burst, data = start_rows("burst-datasette-last1500.json")
        thread, _ = start_rows("datasette-last1500.json")  # its "hybrid" was thread_weight 0.3
        rows = {"bm25": burst["bm25"], "bm25 (related)": burst["bm25 (related)"],
                "bm25 (block)": burst["bm25 (block)"],
                "hybrid (related)": burst["hybrid:burst_weight=0 (related)"],
                "hybrid (block)": burst["hybrid:burst_weight=0 (block)"],
                "thread (related)": thread["hybrid (related)"],
                "burst (related)": burst["hybrid:burst_weight=0.2 (related)"]}
    else:
        table, data = start_rows(f"clean-{name}.json")
        rows = {"bm25": table["bm25"], "bm25 (related)": table["bm25 (related)"],
                "bm25 (block)": table["bm25 (block)"], "hybrid (related)": table["hybrid (related)"],
                "hybrid (block)": table["hybrid (block)"],
                "thread (related)": table["hybrid:thread_weight=0.3 (related)"],
                "burst (related)": table["hybrid:burst_weight=0.2 (related)"]}
    return {k: r["long_recall@5_per_ticket"] for k, r in rows.items()}, data


def cell(values):
    lo, hi = interval95(values)
    return f"{mean(values):.3f} ({lo:.3f} to {hi:.3f})"


def main():
    names = ["datasette-last1500", "sqlite-utils", "llm", "click"]
    per_history = {}
    print("| history | tickets | scored | long n | " + " | ".join(KEYS) + " |")
    print("|---|---|---|---|" + "---|" * len(KEYS))
    for name in names:
        per, data = history(name)
        per_history[name] = per
        print(f"| {name} | {data['tickets']} | {data['scored']} | {data['long_scored']} | "
              + " | ".join(cell(per[k]) for k in KEYS) + " |")
    pooled = {k: sum((per_history[n][k] for n in names), []) for k in KEYS}
    print(f"| **pooled** | | | {len(pooled['bm25'])} | " + " | ".join(cell(pooled[k]) for k in KEYS) + " |")
    for label, per in [("pooled", pooled)] + list(per_history.items()):
        differences(label, per, PAIRS)


def differences(label, per, pairs):
    """The paired per-ticket differences of `pairs` (ours, base) as a table."""
    print(f"\n| difference, per ticket ({label}, {len(per['bm25'])}) | mean (95% interval) | up / down |")
    print("|---|---|---|")
    for ours, base in pairs:
        diff = [a - b for a, b in zip(per[ours], per[base])]
        lo, hi = interval95(diff)
        print(f"| {ours} − {base} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) | "
              f"{sum(d > 0 for d in diff)} / {sum(d < 0 for d in diff)} |")


if __name__ == "__main__":
    main()
