"""`python -m unittest ...` that also writes a JUnit XML report: the same tests, output and exit
code, plus the report at $MIDDLE_JUNIT_PATH.

A check command's `python -m unittest` is run as `python <this file>` (orchestrator.checks.
instrument), by the project's own interpreter, which may not have middle-agent installed: so this
file uses the standard library only, and runs on any Python 3.
"""

import os
import sys
import time
import unittest
from xml.sax.saxutils import quoteattr


class _Result(unittest.TextTestResult):
    """The text result, also keeping each test's outcome for the report."""

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.cases = []  # (class, name, outcome, message)
        self._started = time.monotonic()

    def _keep(self, test, outcome, message=""):  # type: ignore[no-untyped-def]
        test_id = test.id()
        cls, _, name = test_id.rpartition(".")
        self.cases.append((cls, name or test_id, outcome, message))

    def addSuccess(self, test):  # type: ignore[no-untyped-def]  # noqa: N802 - unittest's names
        super().addSuccess(test)
        self._keep(test, "passed")

    def addFailure(self, test, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addFailure(test, err)
        self._keep(test, "failure", _first_line(err))

    def addError(self, test, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addError(test, err)
        self._keep(test, "error", _first_line(err))

    def addSkip(self, test, reason):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addSkip(test, reason)
        self._keep(test, "skipped", reason)

    def addExpectedFailure(self, test, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addExpectedFailure(test, err)
        self._keep(test, "skipped", "expected failure")

    def addUnexpectedSuccess(self, test):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._keep(test, "failure", "unexpected success")

    def addSubTest(self, test, subtest, err):  # type: ignore[no-untyped-def]  # noqa: N802
        super().addSubTest(test, subtest, err)
        if err is not None:  # a failing subtest is a test of its own; passing ones are the test's
            failed = issubclass(err[0], test.failureException)
            self._keep(subtest, "failure" if failed else "error", _first_line(err))


def _first_line(err):  # type: ignore[no-untyped-def]
    exc = err[1]
    text = "%s: %s" % (type(exc).__name__, exc) if exc is not None else str(err[0])
    return text.splitlines()[0] if text else ""


class _Runner(unittest.TextTestRunner):
    resultclass = _Result

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        # every test runs past `-f` (failfast): where the base already fails one, a stop there on
        # both runs would hide a test the ticket breaks after it
        kwargs["failfast"] = False
        super().__init__(*args, **kwargs)

    def run(self, test):  # type: ignore[no-untyped-def]
        result = super().run(test)
        path = os.environ.get("MIDDLE_JUNIT_PATH")
        if path:
            _write(path, result.cases)
        return result


def _write(path, cases):  # type: ignore[no-untyped-def]
    failures = sum(1 for c in cases if c[2] == "failure")
    errors = sum(1 for c in cases if c[2] == "error")
    skipped = sum(1 for c in cases if c[2] == "skipped")
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             '<testsuites><testsuite name="unittest" tests="%d" failures="%d" errors="%d" skipped="%d">'
             % (len(cases), failures, errors, skipped)]
    for cls, name, outcome, message in cases:
        head = "<testcase classname=%s name=%s" % (quoteattr(cls), quoteattr(name))
        if outcome == "passed":
            lines.append(head + "/>")
        else:
            lines.append(head + "><%s message=%s/></testcase>" % (outcome, quoteattr(message[:500])))
    lines.append("</testsuite></testsuites>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():  # type: ignore[no-untyped-def]
    # What `python -m unittest` does: the current folder first on the path, the usage line naming it.
    sys.path[0] = os.getcwd()
    sys.argv[0] = "python -m unittest"
    unittest.main(module=None, testRunner=_Runner)


if __name__ == "__main__":
    main()
