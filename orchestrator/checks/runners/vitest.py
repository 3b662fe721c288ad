"""vitest: every test's outcome from its JSON report (jest's shape, read by orchestrator.checks.jest).

Where the line runs vitest itself (`vitest`, `vitest run`, `npx vitest`), middle appends
`--reporter=default --reporter=json --outputFile.json=<a temporary file>` right after the word
`vitest`: the usual output on stdout, the report beside it (a user's `npm test` script is never
rewritten; a line with its own `--outputFile` is left as it is). Identities are
`file::describe > test`, the file relative to where the run started.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from orchestrator.checks.runners import bail

_VITEST = re.compile(r"(?:^|(?<=[\s;&|(/]))vitest(?=\s|$|;|&|\|)")
_BAIL = re.compile(r"(?<=\s)--bail(?:=\S*|\s+\d+)(?=\s|$)")  # vitest's stop after N failures
# vitest's own words for a run with nothing to run or a command line it does not take
_CANNOT = re.compile(r"^(No test files found, exiting with code 1|\S*CACError: Unknown option .*)$", re.M)


def detects(line: str) -> bool:
    # a line that names its own `--outputFile` would clash with middle's `--outputFile.json`
    return bool(_VITEST.search(line)) and "--outputFile" not in line


def bails(line: str) -> bool:
    """Whether the line gives vitest its own `--bail` (stop after N failures)."""
    found = _VITEST.search(line)
    return bool(found and _BAIL.search(line[found.end():]))


def options(tmp: Path) -> tuple[str, dict[str, str], list[str]]:
    """The options that ask for the report, the environment they need, and where it goes."""
    report = tmp / "vitest.json"
    return f"--reporter=default --reporter=json --outputFile.json={shlex.quote(str(report))}", {}, [str(report)]


def prepare(line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    """Where the line runs vitest itself, also `--bail=0` (every test runs, past a config's `bail`),
    the line's own `--bail` taken out: vitest refuses an option given twice (bail.py). Through
    `npm test` no `--bail=0` is added, for that reason; a script with its own `--bail` is read as a
    wrapper instead, whose preload takes it out of vitest's argv (javascript.script_runner)."""
    flags, env, reports = options(tmp)
    line = bail.without(line, _VITEST, _BAIL)
    return _VITEST.sub(lambda m: f"{m.group(0)} {flags} --bail=0", line, count=1), env, reports


def cannot_run(exit_code: int, output: str) -> str | None:
    found = _CANNOT.search(output)
    return f"vitest: {found.group(1)[:200]}" if found else None


__all__ = ["bails", "cannot_run", "detects", "options", "prepare"]
