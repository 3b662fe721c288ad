"""A fresh process's recall, as a worker starting on a ticket makes it (retrieve, the block,
explain: what graph.nodes._recall does): the time to open the project's services, the first
recall (the store opened, vectors loaded, the model loaded), then 10 more recalls (a ticket's
turns: median and slowest), and the process's peak memory.

    python docs/bench-runs/teamsize2/recall_fresh.py path/to/middle.toml
"""

import resource
import statistics
import sys
import time

started = time.perf_counter()
from orchestrator.config.settings import load_config  # noqa: E402
from orchestrator.services import Services  # noqa: E402


def main() -> None:
    services = Services(load_config(sys.argv[1], environ={}))
    mem, project = services.memory, services.config.project.id
    opened = time.perf_counter() - started

    def recall(query: str) -> float:
        begun = time.perf_counter()
        results = mem.retrieve(project, [query], 25)
        mem.block(project, [], results, limit=5)
        for result in results:
            mem.explain(project, query, result)
        return time.perf_counter() - begun

    first = recall("Module 41 login session. Create calc/m041.py with the check.")
    turns = [recall(f"Module {42 + i} login session: the check {i * 7919} passes in src/f{i}.py") for i in range(10)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"opened {opened:.2f} s; first recall {first:.2f} s; next 10: median {statistics.median(turns):.3f} s, "
          f"slowest {max(turns):.3f} s; peak {peak} MB")


if __name__ == "__main__":
    main()
