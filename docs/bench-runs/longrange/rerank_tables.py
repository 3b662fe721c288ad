"""The tables of docs/memory-benchmarks.md's "Fifth try: a reranker that matches token by token":
hybrid's late-interaction rerank (`hybrid:rerank=maxsim`, `hybrid:rerank=maxsim-rrf`) beside the
default (`hybrid`) and BM25, all in one `middle bench tickets` run per history (run-rerank.sh,
rerank-NAME.json), and the other benchmarks' runs (rerank-decisions.json, rerank-locomo.json,
rerank-musique.json).
Usage: python docs/bench-runs/longrange/rerank_tables.py dev     (the development split, and the others)
       python docs/bench-runs/longrange/rerank_tables.py NAME... (held-out histories, pooled; not run:
                                                                  the development split did not gain)"""
import json
import sys
from pathlib import Path

from orchestrator.bench.metrics import interval95, mean

HERE = Path(__file__).parent
# (label, the run's start-query row): rankings and the default block's related list.
ROWS = [("bm25 start", "bm25"), ("bm25 (related)", "bm25 (related)"), ("bm25 (block)", "bm25 (block)"),
        ("hybrid start", "hybrid"), ("hybrid (related)", "hybrid (related)"), ("hybrid (block)", "hybrid (block)"),
        ("maxsim start", "hybrid:rerank=maxsim"), ("maxsim (related)", "hybrid:rerank=maxsim (related)"),
        ("maxsim (block)", "hybrid:rerank=maxsim (block)"),
        ("maxsim-rrf start", "hybrid:rerank=maxsim-rrf"),
        ("maxsim-rrf (related)", "hybrid:rerank=maxsim-rrf (related)"),
        ("maxsim-rrf (block)", "hybrid:rerank=maxsim-rrf (block)")]
PAIRS = [("maxsim (related)", "hybrid (related)"), ("maxsim-rrf (related)", "hybrid (related)"),
         ("maxsim (block)", "hybrid (block)"), ("maxsim-rrf (block)", "hybrid (block)"),
         ("maxsim start", "hybrid start"), ("maxsim-rrf start", "hybrid start"),
         ("maxsim (related)", "bm25 start"), ("maxsim-rrf (related)", "bm25 start"),
         ("hybrid (related)", "bm25 start")]


def history(name):
    """{label: the run's row} of its start-query rows, and the run."""
    data = json.loads((HERE / f"rerank-{name}.json").read_text())
    table = {r["backend"]: r for r in data["results"] if r["query"] == "start"}
    return {label: table[key] for label, key in ROWS if key in table}, data


def cell(values):
    lo, hi = interval95(values)
    return f"{mean(values):.3f} ({lo:.3f} to {hi:.3f})"


def cpu(row):
    value = row.get("retrieve_cpu_p95_ms")
    return "" if value is None or value != value else f"{value:.1f} ms"  # NaN: no retrieve of its own


def differences(label, per):
    print(f"\n| difference, per ticket ({label}, {len(per['bm25 start'])}) | mean (95% interval) | up / down |")
    print("|---|---|---|")
    for a, b in PAIRS:
        if a in per and b in per:
            diff = [x - y for x, y in zip(per[a], per[b])]
            lo, hi = interval95(diff)
            up, down = sum(d > 0 for d in diff), sum(d < 0 for d in diff)
            print(f"| {a} − {b} | {mean(diff):+.3f} ({lo:+.3f} to {hi:+.3f}) | {up} / {down} |")


def others():
    """Decisions, LoCoMo 1-5 and MuSiQue-100: one run each, the three hybrids."""
    decisions = json.loads((HERE / "rerank-decisions.json").read_text())["results"]
    print("\n| decisions (hit@1 / hit@5 / MRR@10; stale first) | " + " | ".join(
        sorted({r["backend"] for r in decisions}, key=[r["backend"] for r in decisions].index)) + " |")
    print("|---|---|---|---|")
    for name in ("conversation", "amended", "history"):
        cells = [f"{r['hit@1']:.3f} / {r['hit@5']:.3f} / {r['mrr@10']:.3f}; {r['stale_first']} of {r['amended']}"
                 for r in decisions if r["set"] == name]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for bench, file in (("LoCoMo 1-5", "rerank-locomo.json"), ("MuSiQue-100", "rerank-musique.json")):
        print(f"\n| {bench} | R@2 | R@5 | R@10 | retrieve CPU p50 / p95 |")
        print("|---|---|---|---|---|")
        for r in json.loads((HERE / file).read_text())["results"]:
            print(f"| {r['backend']} | {r['recall@2']:.3f} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | "
                  f"{r['retrieve_cpu_p50_ms']:.1f} / {r['retrieve_cpu_p95_ms']:.1f} ms |")


def main():
    names = sys.argv[1:] or ["dev"]
    per_history = {}
    for name in names:
        rows, data = history(name)
        per_history[name] = {label: row["long_recall@5_per_ticket"] for label, row in rows.items()}
        print(f"\n{name}: {data['tickets']} tickets, {data['scored']} scored, {data['long_scored']} long-range")
        print("| row | R@5 (whole) | long R@5 (95% interval) | retrieve CPU p95 |")
        print("|---|---|---|---|")
        for label, row in rows.items():
            whole = "" if label.endswith("(related)") else f"{row['recall@5']:.3f}"
            print(f"| {label} | {whole} | {cell(row['long_recall@5_per_ticket'])} | {cpu(row)} |")
    if len(names) > 1:
        labels = [label for label, _ in ROWS if all(label in per for per in per_history.values())]
        pooled = {k: sum((per_history[n][k] for n in names), []) for k in labels}
        print("\n| history | long n | " + " | ".join(labels) + " |")
        print("|---|---|" + "---|" * len(labels))
        for name, per in {**per_history, "pooled": pooled}.items():
            print(f"| {name} | {len(per['bm25 start'])} | " + " | ".join(cell(per[k]) for k in labels) + " |")
        per_history = {"pooled": pooled, **per_history}
    for name, per in per_history.items():
        differences(name, per)
    if names == ["dev"]:
        others()


if __name__ == "__main__":
    main()
