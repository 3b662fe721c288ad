"""Where the examples (the sample repo and its backlog) are: `middle demo` and `middle bench runs` use them.

Apart from demo.py, which imports the CLI's main module, so that the benchmarks (which the CLI
loads) find the examples without a circle back to the CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.errors import ConfigError


def examples_dir() -> Path:
    """The examples: the clone's `examples/` (editable install), else the copy a wheel installs
    under `<prefix>/share/middle-agent/examples`."""
    candidates = [Path(__file__).resolve().parents[2] / "examples",
                  Path(sys.prefix) / "share" / "middle-agent" / "examples"]
    for here in candidates:
        if (here / "sample-repo").is_dir():
            return here
    raise ConfigError(
        f"the examples were not found (looked in {', '.join(map(str, candidates))}): reinstall "
        "middle-agent, or pass --examples DIR (the `examples/` folder of a clone)")
