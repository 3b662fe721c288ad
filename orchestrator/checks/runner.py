"""Run one check command in a worktree: its exit code, time, the tail of its output, and what it
says failed, one identity per failure, so a run can be compared with the base's failure by
failure (orchestrator.checks.verdict).

A command is a shell line (`python -m pytest -q`, `npm test && npm run lint`), run by `sh -c` in a
process group of its own, so a timeout kills everything it started. Its output goes to a file,
not to memory (a test suite can print megabytes), and the tail is what the middle agent reads.
Failures are read from a JUnit report (pytest and unittest are asked for one, any other command
names its own: orchestrator.checks.instrument), else from diagnostics lines
(orchestrator.checks.diagnostics).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.checks import diagnostics, instrument, junit, output_lines
from orchestrator.checks.instrument import CANNOT_START  # noqa: F401 - re-exported
from orchestrator.checks.runners import cargo, go, javascript, rspec, tap, wrapper
from orchestrator.checks.spec import Item, spec_of
from orchestrator.config.settings import CheckCommand
from orchestrator.procs.guarded import Guarded
from orchestrator.procs.orphans import check_mark, one_call

# The report middle asks each runner for, in the runner's own terms (a run that dies before writing
# it is told so): not "a JUnit report" for a runner asked for JSON
OWN_REPORT = {"pytest": "pytest's JUnit report (--junitxml)", "unittest": "unittest's JUnit report",
              "node-test": "node --test's report (middle's reporter in NODE_OPTIONS)",
              "jest": "jest's JSON report (--json --outputFile)", "vitest": "vitest's JSON report (--reporter=json)",
              "mocha": "mocha's report (middle's reporter)",
              rspec.RUNNER: "rspec's JSON report (SPEC_OPTS' json formatter)"}
# What the middle agent reads of a failing check: the end of its output, where test runners put
# their summary. Enough for a few tracebacks, little enough to leave room for the conversation.
_COLOURS = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # ANSI colour and cursor sequences
TAIL_CHARS = 4000
_GO_PACKAGE_OK = re.compile(r"^ok  \t\S", re.M)  # a package whose tests passed (go test's summary line)
JUNIT, DIAGNOSTICS = "junit", "diagnostics"  # how a run's failures were read
_FIELDS = ("command", "exit_code", "duration_s", "tail", "timed_out", "failing", "kind", "ran", "skipped",
           "problem", "runner", "output_lines")


@dataclass
class CheckResult:
    """One run of one check command."""

    command: str
    exit_code: int | None  # None: it timed out and was killed
    duration_s: float
    tail: str  # the end of its output (stdout and stderr, in order)
    timed_out: bool = False
    # what failed, one identity per failure ("class::test" of a JUnit report; a diagnostics
    # line's "path: [code] message", once per occurrence); None when the run named none
    failing: list[str] | None = None
    kind: str = ""  # JUNIT | DIAGNOSTICS | "" (its exit code alone)
    ran: list[str] | None = None  # the tests that ran (JUnit: passed or failed, not skipped)
    skipped: list[str] | None = None  # the tests it skipped (JUnit)
    problem: str | None = None  # why it could not really run (not found, no tests, no report...)
    runner: str = ""  # "pytest" | "unittest" | "cargo" | "go" | a JavaScript runner | "rspec" | "tap"
    # a failing run read by its exit code alone: its whole output, normalised (output_lines.py), so a
    # ticket's failing run can be compared with the base's line by line (None: not kept, or too long)
    output_lines: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """It exited 0, could run, and its report names no failing test: a recipe `pytest || true`
        or `-pytest` (make ignores its error) exits 0 whatever fails, and a ticket that breaks a
        test there must not pass."""
        return self.exit_code == 0 and self.problem is None and not (self.kind == JUNIT and self.failing)

    @property
    def cannot_start(self) -> bool:
        return self.exit_code in CANNOT_START

    @property
    def tests_run(self) -> int | None:
        return len(self.ran) if self.ran is not None else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CheckResult":
        """A stored result (untrusted: a field of the wrong type is left out)."""
        kept: dict[str, Any] = {}
        for k in _FIELDS:
            if k in data:
                kept[k] = data[k]
        for k in ("failing", "ran", "skipped", "output_lines"):
            if kept.get(k) is not None and not (isinstance(kept[k], list) and all(isinstance(x, str) for x in kept[k])):
                kept[k] = None
        return cls(**{"duration_s": 0.0, "tail": "", "exit_code": None, **kept})


def run_check(command: Item | CheckCommand, cwd: Path | str, *, timeout_s: float,
              env: dict[str, str] | None = None, run_id: str | None = None) -> CheckResult:
    """Run `command` in `cwd` under `sh -c`, at most `timeout_s` seconds (then its whole process
    group is killed). Like a coding agent's turn (procs.guarded.Guarded), it dies with this process
    (even by kill -9), what it started with it, and what it leaves running (a `cmd &`, a server
    in a session of its own) is ended when it ends; with `run_id` it carries the run's marker, so
    whoever takes a dead run over stops what escaped its group."""
    spec = spec_of(command)
    cwd = Path(cwd)
    started = time.monotonic()
    wall_start = time.time()
    environ = {**os.environ, **(env or {})}
    mark = one_call(check_mark(run_id or ""))  # (without a run, only its own end looks for it)
    with tempfile.TemporaryDirectory(prefix="middle-check-") as tmp, tempfile.TemporaryFile() as out:
        prepared = instrument.prepare(spec, Path(tmp), environ, cwd)
        environ.update(prepared.env)
        # behind a wrapper, each version of a report a later run overwrites is kept as it is written
        keeper = wrapper.Keeper(Path(tmp)) if prepared.runner == wrapper.RUNNER else contextlib.nullcontext()
        with keeper:
            code, timed_out = _run(prepared.line, cwd, out, environ, timeout_s, mark)
        duration = time.monotonic() - started
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        result = CheckResult(spec.run, code, round(duration, 3), "", timed_out, runner=prepared.runner)
        if not timed_out:
            # Read without terminal colours: a runner colours its lines when CI=true or
            # FORCE_COLOR is set (vitest's "No test files found" ended in an escape code, and
            # its cannot-run line went unread under CI), whatever this process's terminal is.
            _read_failures(result, spec, prepared, cwd, _COLOURS.sub("", text), wall_start)
            if not result.kind and result.exit_code and result.problem is None:
                result.output_lines = output_lines.normalise(text, str(cwd))
        text = instrument.readable(prepared.runner, text)  # a line's own `go test -json`: shown as its text
    tail = text[-TAIL_CHARS:] if len(text) > TAIL_CHARS else text
    if timed_out:
        tail += f"\n[the check did not finish within {timeout_s:g}s and was stopped]"
    if result.extra.get("wrapper"):  # why its runners' reports were not read
        tail += f"\n[{result.extra['wrapper']}]"
    result.tail = tail
    return result


def _run(line: str, cwd: Path, out: Any, environ: dict[str, str], timeout_s: float,
         mark: str) -> tuple[int | None, bool]:
    """Run the shell line to its end or its timeout: (exit code, None when it timed out; timed out)."""
    guarded = Guarded.start(["sh", "-c", line], mark=mark, env=environ, cwd=str(cwd), stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        return guarded.proc.wait(timeout=timeout_s), False
    except subprocess.TimeoutExpired:
        return None, True
    finally:  # its end, its timeout, a Ctrl-C or a stop: nothing of the check outlives it
        guarded.end()


def _read_failures(result: CheckResult, spec: CheckCommand, prepared: instrument.Prepared, cwd: Path, text: str,
                   since: float) -> None:
    """Fill in the run's failures (from its report or its diagnostics) and whether it could run."""
    result.problem = instrument.cannot_run(result.exit_code, text, prepared.runner)
    if result.problem is not None:
        return
    if prepared.runner in instrument.FROM_OUTPUT:  # cargo test, go test: every test is in its output
        _from_output(result, instrument.FROM_OUTPUT[prepared.runner](text))
        return
    if prepared.runner == wrapper.RUNNER and _from_wrapper(result, prepared, cwd, text, since):
        return
    if prepared.runner == tap.RUNNER or (prepared.runner == wrapper.RUNNER and tap.looks_like(text)):
        # bats, `prove -v`, tape, a home-grown runner: every test's outcome is in its TAP output
        result.runner = tap.RUNNER
        _from_output(result, tap.parse(text), none="its output has no TAP test line (`ok 1 - name`)")
        return
    if spec.format == "junit" and not prepared.wants_report:
        result.problem = 'format = "junit" names no report: add junit = "reports/*.xml" (where the command writes it)'
        return
    if prepared.wants_report and prepared.runner != wrapper.RUNNER:
        files = instrument.report_files(prepared, cwd, since)
        if not files:
            where = ", ".join(p if not Path(p).is_absolute() else "(middle's own report)" for p in prepared.reports)
            own = not spec.junit and all(Path(p).is_absolute() for p in prepared.reports) and OWN_REPORT.get(
                prepared.runner)
            result.problem = (f"{own} was not written: it stopped before reporting its tests" if own
                              else f"its JUnit report was not written ({where})")
            return
        try:
            report = (javascript.read(prepared.runner, files, cwd) if prepared.runner in javascript.RUNNERS
                      else rspec.read(files) if prepared.runner == rspec.RUNNER else junit.read(files))
        except junit.ReportError as exc:
            result.problem = str(exc)
            return
        if not report.cases:
            result.problem = "its JUnit report names no tests (nothing ran)"
            return
        if report.only_collection_errors:
            result.problem = ("no test ran: every failure is a collection or import error ("
                              + report.first_collection_error()[:200] + ")")
            return
        result.kind, result.ran, result.skipped = JUNIT, report.ran, report.skipped
        lint = _coded_problems(result, text, cwd)
        result.failing = sorted(report.failing + lint) or None
        if result.exit_code != 0 and not result.failing:
            # It failed, yet no test did (a coverage threshold, a warning made an error): the
            # failure is the run's own, compared as one.
            result.failing = [f"(the run exited {result.exit_code} with no failing test)"]
        return
    if spec.format == "diagnostics" or (spec.format == "auto" and result.exit_code != 0):
        found = diagnostics.parse(text, cwd)
        if found or (spec.format == "diagnostics" and result.exit_code == 0):
            result.kind = DIAGNOSTICS
            result.failing = sorted(found.elements()) or None
        # format = "diagnostics" failing with none: it names nothing, so it is read by its exit code and
        # output as any other such run (a "no diagnostics" failure on the base and on the ticket would
        # compare equal whatever the ticket broke: `pytest --tb=line`'s lines name no code)


def _from_wrapper(result: CheckResult, prepared: instrument.Prepared, cwd: Path, text: str, since: float) -> bool:
    """A wrapper's run (make, tox, a script): the reports its runners wrote, when they hold every
    run, and the tests go and cargo listed in its output; else its exit code alone (not every
    diagnostics line: a test runner's traceback lines, `test_x.py:5: AssertionError`, would read as
    lint problems; only coded ones). False: no test runner it knows of ran (read as any other command)."""
    found = wrapper.runs(instrument.report_files(prepared, cwd, since), text)
    listed, listed_by = _listed_in_output(text)
    if not any(r.files or r.runs for r in found) and not listed.cases:
        return False
    why = wrapper.incomplete(found)
    if why is None and cargo.stopped(text):
        why = ("cargo test stopped at its first failing test binary (no --no-fail-fast reached it), so the "
               "binaries after it did not run: judged by its exit code")
    if why is not None:
        result.extra["wrapper"] = why
        return True
    try:
        report = wrapper.read(found, cwd)
    except junit.ReportError as exc:  # two runs at once writing one file, a runner that died writing
        result.extra["wrapper"] = f"a report behind it could not be read ({exc}): judged by its exit code"
        return True
    for case in listed.cases.values():
        report.cases.setdefault(case.ident, case)
    # which runners' tests were read behind it (shown nowhere yet; the gate's table asserts each
    # wrapper row reads the runner it claims: tests/graph/gate_matrix.py)
    result.extra["read"] = sorted({r.kind for r in found if r.files} | listed_by)
    if not report.cases:
        kinds = ", ".join(r.kind for r in found if r.files)
        result.problem = f"the test runner behind it collected no tests ({kinds}: its report names none)"
        return True
    if report.only_collection_errors and not _GO_PACKAGE_OK.search(text):
        result.problem = ("no test ran: every failure is a collection, import or build error ("
                          + report.first_collection_error()[:200] + ")")
        return True
    result.kind, result.ran, result.skipped = JUNIT, report.ran, report.skipped
    quiet = go.quiet_packages(text)
    if quiet:
        # go ran without -v there (the wrapper set its own GOFLAGS): its failures are all named
        # (go names every failing test), which tests ran is not, so a removed one cannot be seen
        result.ran = result.skipped = None
        result.extra["wrapper"] = (f"go test listed no test of {', '.join(quiet[:3])} (run without -v): "
                                   "which tests ran is unknown")
    # the recipes make says failed too, and the coded problems a linter printed beside the tests
    # (_coded_problems): a step with no report that fails beside a test the base already fails is
    # named, not hidden behind the same exit code
    steps = wrapper.make_errors(text) + _coded_problems(result, text, cwd)
    result.failing = sorted(report.failing + steps) or None
    if result.exit_code != 0 and not report.failing and not steps:
        result.failing = [f"(the run exited {result.exit_code} with no failing test)"]
    return True


def _listed_in_output(text: str) -> tuple[junit.JUnitReport, set[str]]:
    """The tests go test and cargo test printed in a wrapper's output (go with the -v the wrapper's
    GOFLAGS gives it, libtest unasked), each named as a line running them directly names them, and
    which of the two printed any."""
    report = go.parse(text)
    by = {go.RUNNER} if report.cases else set()
    from_cargo = cargo.in_output(text)
    for case in (from_cargo.cases.values() if from_cargo else []):
        report.cases.setdefault(case.ident, case)
    return report, by | ({cargo.RUNNER} if from_cargo else set())


def _coded_problems(result: CheckResult, text: str, cwd: Path) -> list[str]:
    """In a run that failed, the problems a linter, type checker or compiler printed beside the
    tests (diagnostics.beside_tests: those with a tool's code, ruff's F401, tsc's TS2322, eslint's
    rule, or at a line and column, go vet's and gcc's): a line `pytest; go vet ./...` or a script
    running both names no step, and a problem a ticket adds beside a test the base already fails
    would leave the exit code as it was. A test runner's own `tests/test_x.py:5: AssertionError`
    or a warning's `x.py:3: DeprecationWarning: ...` is not one."""
    if result.exit_code == 0:
        return []
    return diagnostics.beside_tests(text, cwd)


def _from_output(result: CheckResult, report: junit.JUnitReport, none: str = "") -> None:
    """The run's failures from the tests its output lists, read as a JUnit report is."""
    if not report.cases:
        result.problem = none or f"{result.runner} test ran no test"
        return
    result.kind, result.ran, result.skipped = JUNIT, report.ran, report.skipped
    result.failing = report.failing or None
    if result.exit_code != 0 and not report.failing:
        result.failing = [f"(the run exited {result.exit_code} with no failing test)"]
