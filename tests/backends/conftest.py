"""Run the keyword plugin from this checkout, even where an older copy is pip-installed.

The example plugin is usually installed with `pip install ./plugins/middle-agent-keyword-memory`
(a copy, not editable); the tests here must exercise the code in the repository. Spawned
processes inherit sys.path, so they import the same code.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEYWORD_PLUGIN = str(REPO / "plugins" / "middle-agent-keyword-memory")
if KEYWORD_PLUGIN not in sys.path:
    sys.path.insert(0, KEYWORD_PLUGIN)
