"""mocha: every test's outcome from a reporter of middle's (mocha_reporter.cjs).

Mocha takes one reporter, so middle's prints what mocha's default `spec` prints and writes a JUnit
report beside it (`$MIDDLE_MOCHA_REPORT`), with identities `file::suite > test` (the file relative
to where the run started). Where the line runs mocha itself (`mocha`, `npx mocha`), middle appends
`--reporter=<it>` right after the word `mocha`; a line that gives mocha its own reporter (`--reporter`,
`-R` after the word `mocha`; a `c8 --reporter=text` before it is c8's) is left as it is (say where
its report goes with `junit = "..."`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from orchestrator.checks.runners import bail

_MOCHA = re.compile(r"(?:^|(?<=[\s;&|(/]))mocha(?=\s|$|;|&|\|)")
_OWN_REPORTER = re.compile(r"(?:^|\s)(?:--reporter|-R)(?:=|\s|$)")
_BAIL = re.compile(r"(?<=\s)(?:--bail|--no-bail|-b)(?=\s|$)")  # mocha's stop at its first failure
# mocha's own words for a run with nothing to run
_CANNOT = re.compile(r"^(?:\x1b\[\d+m)?(Error: No test files found.*?)(?:\x1b\[\d+m)?$", re.M)
REPORTER = Path(__file__).with_name("mocha_reporter.cjs")


def detects(line: str) -> bool:
    """A line that runs mocha without naming a reporter of its own. Only mocha's own options count:
    a coverage tool before it has its own `--reporter` (yargs-parser's `c8 --reporter=text
    --reporter=html mocha test/*.mjs`, `nyc --reporter=lcov mocha`)."""
    found = _MOCHA.search(line)
    if not found:
        return False
    own = line[found.end():]
    end = bail.END.search(own)  # where mocha's own command ends
    return not _OWN_REPORTER.search(own[:end.start()] if end else own)


def options(tmp: Path) -> tuple[str, dict[str, str], list[str]]:
    """The options that ask for the report, the environment they need, and where it goes."""
    report = tmp / "mocha-junit.xml"
    # `--no-bail`: every test runs, past a script's own `--bail` (`npm test -- ...`: the last wins)
    # or .mocharc's `bail: true` (bail.py)
    return (f"--reporter={shlex.quote(str(REPORTER))} --no-bail", {"MIDDLE_MOCHA_REPORT": str(report)},
            [str(report)])


def prepare(line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    flags, env, reports = options(tmp)
    line = bail.without(line, _MOCHA, _BAIL)
    return _MOCHA.sub(lambda m: f"{m.group(0)} {flags}", line, count=1), env, reports


def cannot_run(exit_code: int, output: str) -> str | None:
    found = _CANNOT.search(output)
    return f"mocha: {found.group(1)[:200]}" if found else None


__all__ = ["REPORTER", "cannot_run", "detects", "options", "prepare"]
