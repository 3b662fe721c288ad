"""Fill a project's memory with the synthetic docs of `middle bench memory-page` (a tenth with
an origin and author, every 500th pinned, every 1000th superseded), `step` docs a call, printing
the time and peak memory after each call.

    python docs/bench-runs/teamsize/fill.py path/to/middle.toml 100000 5000 [FIRST]
"""

import resource
import sys
import time

from orchestrator.bench.memory_page import fill_memory
from orchestrator.config.settings import load_config
from orchestrator.services import Services


def main() -> None:
    config = load_config(sys.argv[1], environ={})
    total, step = int(sys.argv[2]), int(sys.argv[3])
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    services = Services(config)
    started = time.time()
    for start in range(first, total, step):
        fill_memory(services.memory, services.store, config.project.id, start, min(total, start + step))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(min(total, start + step), f"{time.time() - started:.1f} s", f"{peak} MB", flush=True)


if __name__ == "__main__":
    main()
