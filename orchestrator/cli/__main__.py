"""`python -m orchestrator.cli.main`, as the `middle` script does."""

from orchestrator.cli.main import entry

entry()
