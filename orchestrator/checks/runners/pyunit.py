"""`python -m unittest` behind a wrapper (`make test`, tox, a script): asked for its report
through the environment, as pytest is, since the line that runs it is not middle's to change.

PYTHONPATH gains a folder holding middle's `sitecustomize` (unittest_site.py), which every Python
process the wrapper starts imports at startup: one that runs `python -m unittest` (or `coverage
run -m unittest`) gets middle's unittest runner (unittest_junit.py: the same tests, output and exit
code) and writes a JUnit report named by its process id; any other is left as it is, and the
`sitecustomize` it hides is imported after it. Each run prints `Ran N tests in ...`, which
wrapper.py counts against the reports, as for pytest: a Python older than 3.10 (which cannot tell
`-m unittest` at startup) writes none, and the check is then judged by its exit code.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

KIND = "unittest"
REPORT = "unittest-{pid}.xml"  # unittest_site.py puts the process's id in place of {pid}
SITE = "pysite"  # the folder put first on PYTHONPATH
ENV = ("PYTHONPATH", "MIDDLE_UNITTEST_JUNIT", "MIDDLE_PYTEST_RUNALL")  # what tox must pass on
RUN = re.compile(r"^Ran \d+ tests? in \d+(?:\.\d+)?s\s*$", re.M)  # each run's closing line
_HERE = Path(__file__).parent


def prepare(tmp: Path, environ: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The environment that asks each `python -m unittest` for a report, and where they go."""
    env = runall(tmp, environ)  # the site folder with middle's sitecustomize
    shutil.copyfile(_HERE.parent / "unittest_junit.py", tmp / SITE / "middle_unittest_junit.py")
    return {**env, "MIDDLE_UNITTEST_JUNIT": str(tmp / REPORT)}, [str(tmp / "unittest-*.xml")]


def runall(tmp: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment under which a pytest the check starts runs every test past `-x` or
    `--maxfail` (pytest_runall.py, loaded by middle's `sitecustomize`)."""
    site = tmp / SITE
    site.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_HERE / "unittest_site.py", site / "sitecustomize.py")
    shutil.copyfile(_HERE / "pytest_runall.py", site / "middle_pytest_runall.py")
    path = os.pathsep.join(filter(None, [str(site), environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, "MIDDLE_PYTEST_RUNALL": "1"}


__all__ = ["ENV", "KIND", "REPORT", "RUN", "prepare", "runall"]
