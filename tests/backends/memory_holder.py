"""A process that holds a project's memory open between recalls, as `middle run` does between
turns: run in the project's folder, it opens the configured facade once and answers each line
`recall QUERY` on stdin with one JSON line on stdout: the retrieved docs and the "Memories
invoked" block the agent would be shown (memory.facade: retrieve, then block, as
orchestrator.graph.nodes._recall makes it). Used by tests/backends/test_derived_catch_up.py."""

from __future__ import annotations

import json
import sys

from orchestrator.config.settings import load_config
from orchestrator.services import Services

K = 10  # every doc of the tests' projects: sliding_window shows the newest K


def main() -> None:
    project = sys.argv[1]
    with Services(load_config()) as services:
        facade = services.memory
        assert facade is not None, "memory is off in this folder's middle.toml"
        facade.list_docs(project)  # opened now, and kept open between recalls
        print("ready", flush=True)
        for line in sys.stdin:
            verb, _, query = line.rstrip("\n").partition(" ")
            if verb != "recall":
                break
            try:
                results = facade.retrieve(project, [query], K)
                block = facade.block(project, [], results, limit=K)
                answer = {"docs": results[0]["docs"], "block": block.text}
            except Exception as exc:  # said to the test, which fails with it
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
