"""jest (and vitest's JSON, which has jest's shape): every test's outcome from its JSON report.

Where the line runs jest itself (`jest`, `npx jest`, `node_modules/.bin/jest`), middle appends
`--json --outputFile=<a temporary file>` right after the word `jest` (jest still prints its
usual output; a user's `npm test` script is never rewritten). A line with its own `--outputFile`
is left as it is (`junit = "..."` names a JUnit report to read instead). Each test's identity is
`file::describe > test`, the file relative to where the run started; a test file that could not
run (a syntax error, a failing import) is a collection error, as pytest's.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from orchestrator.checks import junit
from orchestrator.checks.runners import bail

_JEST = re.compile(r"(?:^|(?<=[\s;&|(/]))jest(?=\s|$|;|&|\|)")
# jest's own words for a run with nothing to run or a command line it does not take
_CANNOT = re.compile(r"^(No tests found, exiting with code 1|● Unrecognized CLI Parameter:|● Validation Error:"
                     r"|Error: Could not find a config file)", re.M)
# jest's stop at its first failures, in the line: `--bail`, `--bail=2`, `--bail 2`, `-b` (bail.py)
_BAIL = re.compile(r"(?<=\s)(?:--bail(?:=\S*|\s+\d+)?|-b)(?=\s|$)")
_STATUS = {"passed": junit.PASSED, "failed": junit.FAILED}  # pending, skipped, todo, disabled: skipped


def detects(line: str) -> bool:
    # a line that writes its own report (`--json --outputFile=...`) would overwrite middle's option
    return bool(_JEST.search(line)) and "--outputFile" not in line


def options(tmp: Path) -> tuple[str, dict[str, str], list[str]]:
    """The options that ask for the report (and run every test: `--bail=0`, after a script's own
    `--bail` in `npm test -- ...`, where the last one wins), the environment they need, and where
    it goes."""
    report = tmp / "jest.json"
    # --testLocationInResults: each test's line, to name same-named tests in the order they are
    # defined (`jest --randomize` runs them, and lists them, in another order each time)
    return (f"--json --testLocationInResults --outputFile={shlex.quote(str(report))} --bail=0", {},
            [str(report)])


def prepare(line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    flags, env, reports = options(tmp)
    line = bail.without(line, _JEST, _BAIL)
    return _JEST.sub(lambda m: f"{m.group(0)} {flags}", line, count=1), env, reports


def cannot_run(exit_code: int, output: str) -> str | None:
    found = _CANNOT.search(output)
    return f"jest: {found.group(1).strip('● :')}" if found else None


def read(paths: list[Path], cwd: Path, *, by_location: bool = False) -> junit.JUnitReport:
    """The tests of jest-shaped JSON reports (jest --json, vitest --reporter=json). `by_location`
    (jest's, asked with --testLocationInResults): each file's tests taken in the order of their
    lines, not of the run (vitest's report is in the order of definition already; its `location`
    is a failure's, not the test's)."""
    report = junit.JUnitReport()
    for path in paths:
        for case in junit.numbered(_cases(_load(path), cwd, path.name, by_location)):  # a name repeated: another test
            report.add(case)
    return report


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise junit.ReportError(f"{path.name} is not a JSON test report ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("testResults"), list):
        raise junit.ReportError(f"{path.name} is not a jest JSON report (no testResults list)")
    return data


def _cases(data: dict[str, Any], cwd: Path, name: str, by_location: bool = False) -> list[junit.TestCase]:
    out: list[junit.TestCase] = []
    for suite in data["testResults"]:
        if not isinstance(suite, dict):
            raise junit.ReportError(f"{name}: a testResults entry is not an object")
        file = _relative(str(suite.get("name") or ""), cwd)
        tests = [t for t in suite.get("assertionResults") or [] if isinstance(t, dict)]
        if by_location and all(_where(t) for t in tests):
            tests.sort(key=lambda t: _where(t) or (0, 0))  # stable: one line's tests (a loop's) keep their order
        if suite.get("status") == "failed" and not tests:  # the file could not run at all
            message = str(suite.get("message") or "").strip().splitlines()
            out.append(junit.TestCase(f"{file}::(the file)", junit.FAILED,
                                      "Test suite failed to run: " + (message[0] if message else "")[:250], True))
        for test in tests:
            # vitest's first ancestor is the file's own suite, named ""
            titles = [str(t) for t in (test.get("ancestorTitles") or []) if t] + [str(test.get("title") or "")]
            messages = test.get("failureMessages") or [""]
            first = str(messages[0]).strip().splitlines()
            out.append(junit.TestCase(f"{file}::{' > '.join(titles)}", _STATUS.get(str(test.get("status")),
                                      junit.SKIPPED), (first[0] if first else "")[:300]))
    return out


def _where(test: dict[str, Any]) -> tuple[int, int] | None:
    """A test's (line, column) in its file, from jest's --testLocationInResults."""
    loc = test.get("location")
    if isinstance(loc, dict) and isinstance(loc.get("line"), int) and isinstance(loc.get("column"), int):
        return loc["line"], loc["column"]
    return None


def _relative(path: str, cwd: Path) -> str:
    try:
        return Path(path).resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return path


__all__ = ["cannot_run", "detects", "options", "prepare", "read"]
