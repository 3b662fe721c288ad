"""Middle's pytest plugin in a check, copied beside middle's `sitecustomize` (runners/pyunit.py) as
`middle_pytest_runall` and loaded through PYTEST_PLUGINS: the run goes on past its failures.

`pytest -x` (or `--maxfail=N`, in the line or in the project's `addopts`) stops at the first
failure. Where the base already fails a test, both runs stop there, and a test the ticket breaks
after it is never run: the ticket read as "no worse". A check is compared failure by failure, so
both runs must run every test, as `cargo test --no-fail-fast` does (runners/cargo.py). A command
line option cannot say it: PYTEST_ADDOPTS come before the line's own `-x`, and the last one wins.

Loaded only where the folder holding it is on the path (its `sitecustomize` names it), so a
Python that does not get middle's PYTHONPATH runs as it would, never with a plugin it cannot import.
"""

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):  # type: ignore[no-untyped-def]
    if getattr(config.option, "maxfail", 0):
        config.option.maxfail = 0  # pytest's "no limit"
