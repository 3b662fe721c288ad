"""Read JUnit XML, the report nearly every test runner writes (pytest `--junitxml`, our unittest
runner, jest-junit, vitest, mocha, `node --test --test-reporter=junit`, gotestsum,
go-junit-report, cargo nextest, Maven/Gradle surefire), into what a check is judged by: each
test's identity and outcome.

A test's identity is (its file or class, its name with its parameters), spaces and Unicode
included, written `class::name`. The report is produced by the project's own code, so it is read
with defusedxml (no entity expansion, no external references) and only its testcase elements
and their outcome children are used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Outcomes of one test case
PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
# How runners name a test that could not even be collected: pytest (an empty classname and the
# message "collection failure"), unittest's loader (its _FailedTest stands in for a module that
# would not import) and jest-junit / vitest ("Test suite failed to run").
_COLLECTION_CLASSES = ("unittest.loader._FailedTest", "unittest.loader.ModuleImportFailure")
_COLLECTION_MESSAGES = ("collection failure", "Test suite failed to run", "failed to import")


@dataclass
class TestCase:
    """One test case of a report."""

    __test__ = False  # not a pytest class

    ident: str  # "class::name"
    outcome: str  # PASSED | FAILED | ERROR | SKIPPED
    message: str = ""
    collection: bool = False  # it stands for a module that could not be collected or imported


@dataclass
class JUnitReport:
    """What one check run's JUnit report(s) say, per test."""

    cases: dict[str, TestCase] = field(default_factory=dict)

    @property
    def failing(self) -> list[str]:
        return sorted(i for i, c in self.cases.items() if c.outcome in (FAILED, ERROR))

    @property
    def ran(self) -> list[str]:
        """The tests that ran (passed or failed), not skipped ones, nor collection errors."""
        return sorted(i for i, c in self.cases.items() if c.outcome != SKIPPED and not c.collection)

    @property
    def skipped(self) -> list[str]:
        return sorted(i for i, c in self.cases.items() if c.outcome == SKIPPED)

    @property
    def only_collection_errors(self) -> bool:
        """Nothing ran and what failed could not even be collected or imported."""
        return bool(self.cases) and not self.ran and any(c.collection for c in self.cases.values())

    def first_collection_error(self) -> str:
        case = next((c for c in self.cases.values() if c.collection), None)
        return f"{case.ident}: {case.message}".strip(": ") if case else ""

    def add(self, case: TestCase) -> None:
        """A test reported twice (a rerun, two files): it passed if any run of it passed."""
        seen = self.cases.get(case.ident)
        if seen is None or _rank(case.outcome) > _rank(seen.outcome):
            self.cases[case.ident] = case


def _ident(cls: str, file: str, name: str) -> str:
    """`class::name`; with the test's file (pytest's xunit1 report, some others), the runner's own
    id where it can be told: `tests/test_x.py::TestA::test_b[p]`, which the agent can run."""
    if file:
        parts = cls.split(".") if cls else []
        stem = Path(file).stem
        if stem in parts:
            return "::".join([file.removeprefix("./"), *parts[parts.index(stem) + 1:], name])
        if not cls:
            return f"{file.removeprefix('./')}::{name}"
    return f"{cls}::{name}" if cls else name


def _rank(outcome: str) -> int:
    return {SKIPPED: 0, ERROR: 1, FAILED: 2, PASSED: 3}[outcome]


class ReportError(ValueError):
    """A report file that is not JUnit XML (or not readable)."""


def read(paths: list[Path]) -> JUnitReport:
    """The test cases of every report file in `paths`; a file that is not JUnit XML: ReportError."""
    report = JUnitReport()
    for path in paths:
        for case in _cases(path):
            report.add(case)
    return report


def _cases(path: Path) -> list[TestCase]:
    from xml.etree.ElementTree import ParseError

    from defusedxml import ElementTree
    from defusedxml.common import DefusedXmlException

    try:
        root = ElementTree.parse(str(path)).getroot()
    except (ParseError, DefusedXmlException, OSError) as exc:
        raise ReportError(f"{path.name} is not a JUnit XML report ({exc})") from None
    if root.tag not in ("testsuites", "testsuite", "testcase"):
        raise ReportError(f"{path.name} is not a JUnit XML report (its root is <{root.tag}>)")
    return numbered([_case(el) for el in root.iter("testcase")])


def numbered(cases: list[TestCase]) -> list[TestCase]:
    """Same-named cases within ONE report are different tests (Node's junit reporter names every
    case's class "test" and gives no file, so `a.test.js` and `b.test.js` each with a test "adds"
    read alike): the second and later get " (2)", " (3)" in report order, so a failure that moves
    from one to the other is not taken for the same failure. Across report files a repeat is the
    same test run again (`JUnitReport.add`)."""
    seen: dict[str, int] = {}
    out = []
    for case in cases:
        n = seen[case.ident] = seen.get(case.ident, 0) + 1
        out.append(case if n == 1 else replace(case, ident=f"{case.ident} ({n})"))
    return out


def _case(el: Any) -> TestCase:
    attrs = el.attrib
    cls = (attrs.get("classname") or "").strip()
    name = (attrs.get("name") or "").strip()
    ident = _ident(cls, (attrs.get("file") or "").strip(), name)
    outcome, message = PASSED, ""
    for child in el:
        tag = child.tag
        if tag in ("failure", "error"):
            outcome = FAILED if tag == "failure" else ERROR
            message = child.attrib.get("message") or next(iter((child.text or "").strip().splitlines()), "")
            break
        if tag == "skipped":
            outcome, message = SKIPPED, child.attrib.get("message") or ""
    collection = outcome in (FAILED, ERROR) and (
        cls.startswith(_COLLECTION_CLASSES) or (not cls and message in ("collection failure",))
        or any(m in message for m in _COLLECTION_MESSAGES))
    return TestCase(ident, outcome, message[:300], collection)


__all__ = ["ERROR", "FAILED", "JUnitReport", "PASSED", "ReportError", "SKIPPED", "TestCase", "numbered", "read"]
