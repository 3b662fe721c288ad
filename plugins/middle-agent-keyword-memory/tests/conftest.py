"""Lets the plugin's tests run from a checkout where the plugin is not pip-installed yet."""

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("middle_agent_keyword_memory") is None:
    # Not installed: import the package from this checkout (the entry-point test then skips).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
