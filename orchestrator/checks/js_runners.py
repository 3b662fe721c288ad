"""The JavaScript test runners whose every test's outcome middle asks for with no configuration:
`node --test`, jest, vitest and mocha (one module each). The hooks instrument.py and runner.py
call: which runner a line runs, how to ask it for its report, when its output says it could not
really run, and how to read a report that is not JUnit (jest's and vitest's JSON).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from orchestrator.checks import jest, junit, mocha, node_test, vitest

# Checked in this order: a line that runs two (`node --test && jest`) is read for the first.
RUNNERS: dict[str, ModuleType] = {"node-test": node_test, "jest": jest, "vitest": vitest, "mocha": mocha}
JSON_REPORTS = ("jest", "vitest")  # reports in jest's JSON shape; the others write JUnit


def runner_of(line: str) -> str:
    return next((name for name, module in RUNNERS.items() if module.detects(line)), "")


def prepare(runner: str, line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    """The line to run, the environment it needs, and where its report goes."""
    return RUNNERS[runner].prepare(line, tmp, environ)  # type: ignore[no-any-return]


def cannot_run(runner: str, exit_code: int, output: str) -> str | None:
    return RUNNERS[runner].cannot_run(exit_code, output)  # type: ignore[no-any-return]


def read(runner: str, files: list[Path], cwd: Path) -> junit.JUnitReport:
    return jest.read(files, cwd) if runner in JSON_REPORTS else junit.read(files)


__all__ = ["JSON_REPORTS", "RUNNERS", "cannot_run", "prepare", "read", "runner_of"]
