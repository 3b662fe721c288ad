"""mocha: every test's outcome from a reporter of middle's (mocha_reporter.cjs).

Mocha takes one reporter, so middle's prints what mocha's default `spec` prints and writes a JUnit
report beside it (`$MIDDLE_MOCHA_REPORT`), with identities `file::suite > test` (the file relative
to where the run started). Where the line runs mocha itself (`mocha`, `npx mocha`), middle appends
`--reporter=<it>` right after the word `mocha`; a line that names its own reporter (`--reporter`,
`-R`) is left as it is (say where its report goes with `junit = "..."`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

_MOCHA = re.compile(r"(?:^|(?<=[\s;&|(/]))mocha(?=\s|$|;|&|\|)")
_OWN_REPORTER = re.compile(r"(?:^|\s)(?:--reporter|-R)(?:=|\s|$)")
# mocha's own words for a run with nothing to run
_CANNOT = re.compile(r"^(?:\x1b\[\d+m)?(Error: No test files found.*?)(?:\x1b\[\d+m)?$", re.M)
REPORTER = Path(__file__).with_name("mocha_reporter.cjs")


def detects(line: str) -> bool:
    return bool(_MOCHA.search(line)) and not _OWN_REPORTER.search(line)


def options(tmp: Path) -> tuple[str, dict[str, str], list[str]]:
    """The options that ask for the report, the environment they need, and where it goes."""
    report = tmp / "mocha-junit.xml"
    return f"--reporter={shlex.quote(str(REPORTER))}", {"MIDDLE_MOCHA_REPORT": str(report)}, [str(report)]


def prepare(line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    flags, env, reports = options(tmp)
    return _MOCHA.sub(lambda m: f"{m.group(0)} {flags}", line, count=1), env, reports


def cannot_run(exit_code: int, output: str) -> str | None:
    found = _CANNOT.search(output)
    return f"mocha: {found.group(1)[:200]}" if found else None


__all__ = ["REPORTER", "cannot_run", "detects", "options", "prepare"]
