"""Test the plugin code beside these tests, even where an older copy is pip-installed.

`pip install ./plugins/...` (without -e) copies the package into site-packages; putting the
checkout first on sys.path makes the tests (and processes they spawn, which inherit sys.path)
import this checkout's code instead. The entry point names a module, so it resolves here too.
"""

import sys
from pathlib import Path

# `installed_plugins`: a test that uses it loads the pip-installed plugins, this one among them
# (middle-agent's own tests load none unless they ask).
from orchestrator.testing.plugins import installed_plugins  # noqa: F401 (a fixture)

CHECKOUT = str(Path(__file__).resolve().parents[1])
if CHECKOUT not in sys.path:
    sys.path.insert(0, CHECKOUT)
