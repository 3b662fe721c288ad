"""A ticket's recall (retrieve, block, explain: what graph.nodes._recall does) in one process,
with the memory's curation read as all of the project's state rows (A, before) or only the
marks a recall needs (B, `memory_marks`), alternating, 5 each; medians.

    python docs/bench-runs/teamsize/recall_ab.py path/to/middle.toml
"""

import statistics
import sys
import time

from orchestrator.config.settings import load_config
from orchestrator.services import Services


def main() -> None:
    services = Services(load_config(sys.argv[1], environ={}))
    mem, store, project = services.memory, services.store, services.config.project.id

    def recall(query: str) -> None:
        results = mem.retrieve(project, [query], 25)
        mem.block(project, [], results, limit=5)
        for result in results:
            mem.explain(project, query, result)

    times: dict[str, list[float]] = {"A all rows": [], "B marks": []}
    recall("warm up")
    for i in range(5):
        for name, source in (("A all rows", store.memory_state), ("B marks", store.memory_marks)):
            mem.state_source = source
            started = time.perf_counter()
            recall(f"Module {40 + i} login session. Create calc/m0{40 + i}.py")
            times[name].append(time.perf_counter() - started)
    for name, spent in times.items():
        print(name, f"median {statistics.median(spent):.3f} s, fastest {min(spent):.3f} s")


if __name__ == "__main__":
    main()
