"""`node --test`: every test's outcome, asked for with no change to the command line.

Node (20 and later) takes test reporters from `NODE_OPTIONS` as from its command line, so middle
adds two there: `spec` on stdout (what a person and the middle agent read, as without middle) and
its own reporter (node_reporter.mjs) writing a JUnit report to a temporary file. Its
identities are `file::suite > test` with the file relative to where the run started: Node's own
junit reporter names every test's class "test" and gives no file. A file that cannot even load is
reported as a collection error (a run where that is every failure cannot run). A line that names
its own `--test-reporter` is left as it is (Node refuses reporters and destinations whose counts
differ): say where its report goes with `junit = "..."`.
"""

from __future__ import annotations

import re
from pathlib import Path

_NODE_TEST = re.compile(r"(?:^|(?<=[\s;&|(/]))node(?:\s+[^\s;&|]+)*?\s+--test(?=\s|$|;|&|\|)")
_NOT_FOUND = re.compile(r"^Could not find '.*'$", re.M)
REPORTER = Path(__file__).with_name("node_reporter.mjs")


def detects(line: str) -> bool:
    return bool(_NODE_TEST.search(line)) and "--test-reporter" not in line


def prepare(line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    """The line unchanged, NODE_OPTIONS with the two reporters, and where the report goes."""
    report = tmp / "node-test-junit.xml"
    opts = " ".join(filter(None, [environ.get("NODE_OPTIONS", ""),
                                  "--test-reporter=spec", "--test-reporter-destination=stdout",
                                  f"--test-reporter={quote(str(REPORTER))}",
                                  f"--test-reporter-destination={quote(str(report))}"]))
    return line, {"NODE_OPTIONS": opts}, [str(report)]


def quote(value: str) -> str:
    """A value as NODE_OPTIONS reads it: split on spaces, double quotes with backslash escapes
    (not a shell: single quotes are not quotes there)."""
    if not re.search(r'[\s"\\]', value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cannot_run(exit_code: int, output: str) -> str | None:
    found = _NOT_FOUND.search(output)
    return f"node --test: {found.group(0)[:200]}" if found else None


__all__ = ["REPORTER", "cannot_run", "detects", "prepare", "quote"]
