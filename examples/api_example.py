"""Run the sample backlog through the Python API, offline, on the built-in fake model.

    python examples/api_example.py [WORKDIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from orchestrator import Orchestrator
from orchestrator.cli.demo import examples_dir, prepare
from orchestrator.config import load_config


def main() -> None:
    workdir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="middle-api-"))
    config = load_config(prepare(workdir, examples_dir(), "sliding_window"), environ={})
    # With a real key you would drop fake=True (Claude via ANTHROPIC_API_KEY), or pass
    # llm=<any LangChain chat model>.
    with Orchestrator(config, fake=True) as orch:
        orch.sync_tickets()
        for ticket in orch.store.list_tickets(status="pending"):
            outcome = orch.run_ticket(ticket.id)  # on its own branch, middle/<id>
            print(f"{ticket.id}: {outcome.status} after {outcome.turns} turn(s), "
                  f"{outcome.changes} file(s) changed")
            if outcome.status == "complete":
                print("  " + orch.merge(ticket.id).message)  # into the base branch
        if orch.memory is not None:  # None when memory is off ([memory] backend = "none")
            print("memory:", orch.memory.list_docs("calc"))


if __name__ == "__main__":
    main()
