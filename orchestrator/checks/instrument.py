"""Ask a check command for a report of each failure, and tell a check that cannot really run.

- **pytest** (a command that runs `pytest`, `py.test` or `python -m pytest`): `PYTEST_ADDOPTS`
  gains `--junitxml=<a temporary file>` (unless the command names its own `--junitxml`, which is
  then read; `junit_family=xunit1`, whose test files give pytest's own test ids) and
  `--continue-on-collection-errors`, so a module that fails to import is one
  failure among the others, not a run with no tests; a line that runs pytest twice (`pytest a;
  pytest b`) is read as a wrapper is (below), so the second run's report does not replace the first's;
- **unittest** (`python -m unittest ...`): run through orchestrator/checks/unittest_junit.py,
  which is unittest with a JUnit report (same tests, output and exit code);
- **cargo test** and **go test** (run directly by the line) are read from their own output:
  orchestrator/checks/runners/cargo.py (`--no-fail-fast` inserted after `cargo test`) and
  orchestrator/checks/runners/go.py (`GOFLAGS` gains `-v`);
- **`node --test`, jest, vitest, mocha**: asked for a report of their own, each its own way
  (orchestrator/checks/runners/javascript.py);
- **rspec** (`rspec`, `bundle exec rspec`, `rake spec`): `SPEC_OPTS` gains a `--require` that
  adds rspec's JSON formatter beside the run's own (orchestrator/checks/runners/rspec.py);
- **any other command** (`make test`, `tox`, `nox -s tests`, a script: a wrapper) gets every
  report request the environment carries (pytest's, unittest's, rspec's, `node --test`'s), and whichever
  reports the run wrote are read (orchestrator/checks/runners/wrapper.py); else it names its
  report with `junit = "..."`, or prints diagnostics lines.

A check that cannot really run (not found, a runner that is not installed, pytest's usage error or
"no tests collected", unittest's "Ran 0 tests", a JUnit report that is missing or empty, a run
whose every failure is a collection or import error) is told apart from one that fails: on the
base it is the config's mistake, never a baseline every ticket "passes" against.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.checks.runners import cargo, go, javascript, pyunit, rspec, tap, wrapper
from orchestrator.config.settings import CheckCommand

_PYTEST = re.compile(r"(?:^|[\s;&|(/])(?:py\.test|pytest)(?:\s|$|;|&|\|)|-m\s+pytest\b")
_UNITTEST = re.compile(r"(?P<py>(?:^|(?<=[\s;&|(]))(?:\S*/)?python[\d.]*)\s+-m\s+unittest\b")
_OWN_JUNITXML = re.compile(r"--junit-?xml(?:=|\s+)(\S+)")
# `python -m X` when X is not installed: "/usr/bin/python3: No module named pytset"
_NO_RUNNER = re.compile(r"^\S*python[\d.]*: (No module named \S+|can't open file .*)$", re.M)
# `sh` answers 127 for a command it cannot find and 126 for one it cannot execute
CANNOT_START = (126, 127)
PYTEST_USAGE, PYTEST_NO_TESTS, PYTEST_INTERNAL = 4, 5, 3
_UNITTEST_NONE = re.compile(r"^(?:Ran 0 tests in |NO TESTS RAN)", re.M)
# Runners whose every test's outcome is read from their own output (no report file)
FROM_OUTPUT = {cargo.RUNNER: cargo.parse, go.RUNNER: go.parse}


@dataclass
class Prepared:
    """The command as it is run: its shell line, extra environment, and where its report goes."""

    line: str
    env: dict[str, str] = field(default_factory=dict)
    reports: list[str] = field(default_factory=list)  # globs, relative to where it runs, or absolute paths
    # "pytest" | "unittest" | "cargo" | "go" | a JavaScript runner (javascript.RUNNERS) | "rspec" |
    # "wrapper" (no runner named: the env-carried reports asked for) | "" (the user says how to read it)
    runner: str = ""

    @property
    def wants_report(self) -> bool:
        return bool(self.reports)


def runner_of(line: str) -> str:
    if _UNITTEST.search(line):
        return "unittest"
    if _PYTEST.search(line):  # a line running pytest and cargo or go test: read as pytest, as before
        return "pytest"
    if cargo.COMMAND.search(line) and not cargo.QUIET.search(line):
        return cargo.RUNNER
    if go.COMMAND.search(line):
        return go.RUNNER
    if rspec.detects(line):
        return rspec.RUNNER
    return javascript.runner_of(line)  # node --test, jest, vitest, mocha (orchestrator/checks/runners/javascript.py)


def prepare(spec: CheckCommand, tmp: Path, environ: dict[str, str], cwd: Path | None = None) -> Prepared:
    """The command with its report asked for (a report file under `tmp` where middle asks for it)."""
    line = spec.run
    runner = runner_of(line) or javascript.script_runner(line, cwd)  # `npm test`: its script's runner
    if runner in FROM_OUTPUT and (spec.format != "auto" or spec.junit):
        runner = ""  # the user says how to read it: not from its output
    if spec.format in ("exit-code", "diagnostics"):
        return Prepared(line, runner=runner)
    if spec.junit:
        return Prepared(line, reports=[spec.junit], runner=runner)
    if runner == "pytest" and len(_PYTEST.findall(line)) > 1 and not _OWN_JUNITXML.search(line):
        # pytest run twice (`pytest a; pytest b`): the second would rewrite the first's report
        return Prepared(*wrapper.prepare(line, tmp, environ, cwd), runner=wrapper.RUNNER)
    if runner == "pytest":
        own = _OWN_JUNITXML.search(line)
        if own:
            return Prepared(line, reports=[own.group(1).strip("'\"")], runner=runner)
        report = tmp / "pytest-junit.xml"
        opts = " ".join(filter(None, [environ.get("PYTEST_ADDOPTS", ""), f"--junitxml={shlex.quote(str(report))}",
                                      "-o", "junit_family=xunit1", "--continue-on-collection-errors"]))
        # past `-x` too: a base failure would stop both runs before a test the ticket breaks
        return Prepared(line, {"PYTEST_ADDOPTS": opts, **pyunit.runall(tmp, environ)}, [str(report)], runner)
    if runner == "unittest":
        script = Path(__file__).with_name("unittest_junit.py")
        report = tmp / "unittest-junit.xml"
        new_line = _UNITTEST.sub(lambda m: f"{m.group('py')} {shlex.quote(str(script))}", line)
        return Prepared(new_line, {"MIDDLE_JUNIT_PATH": str(report)}, [str(report)], runner)
    if runner == cargo.RUNNER:
        return Prepared(cargo.add_no_fail_fast(line), runner=runner)
    if runner == go.RUNNER:
        return Prepared(go.without_failfast(line), go.goflags(environ), runner=runner)
    if runner in javascript.RUNNERS:
        return Prepared(*javascript.prepare(runner, line, tmp, environ), runner=runner)
    if runner == rspec.RUNNER:
        return Prepared(*rspec.prepare(line, tmp, environ), runner=runner)
    if spec.format == "tap" and not spec.junit:  # the user says its output is TAP: read it, whatever runs
        return Prepared(line, runner=tap.RUNNER)
    if not runner and spec.format == "auto":  # make, tox, nox, a script: whatever it runs may report
        return Prepared(*wrapper.prepare(line, tmp, environ, cwd), runner=wrapper.RUNNER)
    return Prepared(line, runner=runner)


def report_files(prepared: Prepared, cwd: Path, since: float) -> list[Path]:
    """The report files the run wrote: each glob's matches changed since the run started (a report
    left by an earlier run is not this run's)."""
    found: list[Path] = []
    for pattern in prepared.reports:
        p = Path(pattern)
        if p.is_absolute():  # middle's own: a file, or a glob of files in its temporary folder (wrapper.py)
            matches = sorted(p.parent.glob(p.name)) if "*" in p.name else [p]
        else:
            matches = sorted(cwd.glob(pattern))
        for m in matches:
            try:
                if m.is_file() and m.stat().st_mtime >= since - 1:
                    found.append(m)
            except OSError:
                continue
    return found


def cannot_run(exit_code: int | None, output: str, runner: str) -> str | None:
    """Why the command could not really run, from its exit code and output (None: it ran)."""
    if exit_code == 0 and runner == wrapper.RUNNER:
        return wrapper.ran_nothing(output)
    if exit_code is None or exit_code == 0:
        return None
    if exit_code in CANNOT_START:
        last = next((ln.strip() for ln in reversed(output.strip().splitlines()) if ln.strip()), "")
        return f"exit {exit_code}: {last[:200] or 'command not found'}"
    missing = _NO_RUNNER.search(output)
    if missing:
        return missing.group(1)[:200]
    if runner == "pytest" and exit_code == PYTEST_USAGE:
        return "pytest's usage error (exit 4): " + _last(output)
    if runner == "pytest" and exit_code == PYTEST_NO_TESTS:
        return "pytest collected no tests (exit 5)"
    if runner == "pytest" and exit_code == PYTEST_INTERNAL:
        return "pytest's internal error (exit 3): " + _last(output)
    if runner == "unittest" and _UNITTEST_NONE.search(output):
        return "unittest ran no tests"
    if runner == cargo.RUNNER:
        return cargo.cannot_run(output)
    if runner == go.RUNNER:
        return go.cannot_run(output)
    if runner in javascript.RUNNERS:
        return javascript.cannot_run(runner, exit_code, output)
    if runner == rspec.RUNNER:
        return rspec.cannot_run(exit_code, output)
    if runner == wrapper.RUNNER:
        return wrapper.cannot_run(output)
    return None


def readable(runner: str, output: str) -> str:
    """The run's output as a person reads it (a line's own `go test -json` events as their text)."""
    if runner == go.RUNNER:
        return go.without_package_lists(go.readable(output))
    # behind a wrapper go gets GOFLAGS=-v too: `go vet` and `go build` then list what they compile
    return go.without_package_lists(output) if runner == wrapper.RUNNER else output


def _last(output: str) -> str:
    return next((ln.strip() for ln in reversed(output.strip().splitlines()) if ln.strip()), "")[:200]


__all__ = ["CANNOT_START", "FROM_OUTPUT", "Prepared", "cannot_run", "prepare", "readable", "report_files",
           "runner_of"]
