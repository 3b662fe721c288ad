"""Test the plugin code beside these tests, even where an older copy is pip-installed.

`pip install ./plugins/...` (without -e) copies the package into site-packages; putting the
checkout first on sys.path makes the tests (and processes they spawn, which inherit sys.path)
import this checkout's code instead. The entry point names a module, so it resolves here too.
"""

import sys
from pathlib import Path

CHECKOUT = str(Path(__file__).resolve().parents[1])
if CHECKOUT not in sys.path:
    sys.path.insert(0, CHECKOUT)
