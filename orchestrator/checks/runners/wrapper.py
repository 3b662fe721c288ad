"""A line that names no runner (`make test`, `tox`, `nox -s tests`, `./scripts/test.sh`, `just
test`, `hatch test`): the runners that take their report request from the environment are all
asked at once, since a wrapper passes its environment on, and whichever reports the run wrote are
read.

- **pytest**: `PYTEST_ADDOPTS` gains `--junitxml=<tmp>/pytest-${TOX_ENV_NAME}${NOX_CURRENT_SESSION}.xml`
  (pytest expands environment variables in that path, so each tox env and nox session writes its
  own file), as a line that runs pytest gets it;
- **rspec**: `SPEC_OPTS` gains middle's formatter (rspec.py), writing one file per rspec process;
- **`python -m unittest`**: `PYTHONPATH` gains middle's `sitecustomize` (pyunit.py), which gives a
  Python process that runs `-m unittest` middle's runner, writing one file per process;
- **`node --test`**: `NODE_OPTIONS` gains middle's reporters (node.py), when the `node` on PATH
  is 20 or later: on an older Node a `--test-reporter` in NODE_OPTIONS stops every node process
  (a build step, npm itself), which would break a check that passes;
- **jest, vitest, mocha**: `NODE_OPTIONS` gains `--require jest_argv.cjs` (where it gains the
  reporters), which, in the node process that runs the runner's own bin and no other, adds the
  options a line running it gets (jest.py, vitest.py, mocha.py), writing one report per process
  (a vitest line's own `--bail` is taken out of vitest's argv there, and `--bail=0` added);
- **uvu** (`uvu -r esm test`, an `npm test` running it): `NODE_OPTIONS` also gains `--require
  uvu_preload.cjs`, which, in the node process that runs uvu's bin and no other, makes `uvu` (its
  import, through a module resolve hook, and its require, through Node's module cache) middle's
  wrapper of uvu's public API, which records each test's outcome into one report per process, in
  jest's JSON shape (uvu_core.cjs); uvu's own `--bail` is taken out of its argv there;
- **a test file run by plain `node`** (`node test.js`, `node test/a.js; node test/b.js`):
  `NODE_OPTIONS` also gains `--require node_script.cjs`, which records, in each node process whose
  main file is the project's own (not in node_modules), that file and its exit code: each file one
  test (node_script.py; a file failing on the base and on the ticket is undecided, verdict.py);
- **tox** filters the environment (its default `pass_env` has none of these), so `TOX_OVERRIDE`
  (tox 4's `--override` from the environment) adds them to `pass_env` of `[testenv]` (tox.ini) and
  `[env_run_base]` (tox.toml), and of each `[testenv:NAME]` of the project's tox.ini (an env's own
  `pass_env` replaces the base's; an override naming an env tox does not have is ignored). An env
  it still misses (tox.toml's own envs, a generated name) passes nothing on, and its pytest writes
  no report: that is caught below. nox passes the whole environment on.

- **go test**: `GOFLAGS` gains `-v` (go.py), so it lists every test (`go build` and `go vet` then
  name the packages they compile, on stderr); a tox env gets it through `TOX_OVERRIDE` as above;
- **cargo test**: a `cargo` of middle's first on PATH adds `--no-fail-fast` to `cargo test`
  (cargo.py); libtest lists every test unasked (tox passes PATH on by default).

Both are read from the output (runner.py), as a line running them directly is; a go package that
passed listing no test (the wrapper set its own GOFLAGS) leaves which tests ran unknown, and a
cargo that stopped at its first failing binary leaves the run judged as one read by its exit code.

**A wrapper may run a runner more than once** (a Makefile running pytest on two folders, tox with
several envs, `make test` running `make unit` and `make integration`). A report overwritten by a
later run would lose the first run's failures, and a broken ticket could pass. So:

- while the command runs, `Keeper` copies each complete version of the pytest and `node --test`
  reports as soon as it is written (a later run rewrites the same file only after starting,
  importing and running its tests; rspec's files are one per process already);
- the runs are counted from the output (each pytest, rspec and `node --test` run prints one
  summary line) and compared with the reports kept: when a runner ran more often than it left
  reports (two runs at once, `make -j`, overwriting each other; a tox env with its own `pass_env`;
  a `-qq` or a redirected output that hides the count), or a report cannot be read (two runs'
  writes mixed in one file), the check is judged by its exit code, never by a partial report.

A test run by several runs is one test, failing if it failed in any of them (a pass in one run
does not hide a failure in another; two tox envs running the same suite are the same tests), and
run if any of them ran it.

**A step that writes no report** (a linter beside the tests) fails unseen when the tests already
fail on the base: the wrapper's exit code is the same. make says which of its recipes failed
(`make[1]: *** [Makefile:7: lint] Error 3`, `make: [Makefile:2: test] Error 1 (ignored)`), so each
such line is one more failure, `(make) lint: Error 3`, its line number left out (an edit above it
moves it): a Makefile that runs `$(MAKE) unit; $(MAKE) lint`, ignores a recipe's error (`-ruff
check .`) or is run with `make -k` names the step a ticket broke.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from orchestrator.checks import junit
from orchestrator.checks.runners import cargo, go, jest, mocha, node, node_script, pyunit, rspec

RUNNER = "wrapper"
MAKE_STEP = "(make) "  # how a recipe make says failed is named among the failures
# One report file per tox env / nox session: pytest expands these in the --junitxml path (an unset
# one is left as it is, still a valid file name)
PYTEST_REPORT = "pytest-${TOX_ENV_NAME}${NOX_CURRENT_SESSION}.xml"
RSPEC_REPORT = "rspec-{pid}.json"  # rspec_report.rb puts the rspec process's id in place of {pid}
NODE_REPORT = "node-test-junit.xml"  # node.py's
JEST_REPORT = "jest-{pid}.json"  # jest_argv.cjs puts the jest process's id in place of {pid}
JEST_ARGV = Path(__file__).with_name("jest_argv.cjs")  # jest's, vitest's and mocha's
VITEST_REPORT = "vitest-{pid}.json"
MOCHA_REPORT = "mocha-{pid}.xml"
UVU_REPORT = "uvu-{pid}.json"  # uvu_core.cjs's, in jest's JSON shape
UVU_PRELOAD = Path(__file__).with_name("uvu_preload.cjs")
KEPT = "kept"  # where Keeper copies them
_KEPT_NUMBER = re.compile(r"^\d{4}-")
# GOFLAGS: go test's -v (go.py); PATH, which carries middle's cargo, tox passes on unasked
TOX_PASS = ("PYTEST_ADDOPTS", "SPEC_OPTS", "MIDDLE_RSPEC_JSON", "NODE_OPTIONS", "MIDDLE_JEST_JSON",
            "MIDDLE_VITEST_JSON", "MIDDLE_MOCHA_JUNIT", "MIDDLE_MOCHA_REPORTER", "MIDDLE_UVU_JSON", "GOFLAGS",
            "MIDDLE_NODE_SCRIPT_JSON", "MIDDLE_NODE_SCRIPT_ROOT", *pyunit.ENV)
NODE_MIN = 20
# Each run's closing summary line: pytest (`1 failed, 3 passed in 0.12s`, `no tests ran in 0.01s`,
# between `=` rules or not), rspec (`3 examples, 1 failure`), the spec reporter middle gives
# `node --test` (`ℹ tests 3`)
_PYTEST_RUN = re.compile(r"^(?:=+ )?(?:no tests ran|\d+ \w+(?: \w+)?(?:, \d+ \w+(?: \w+)?)*) in \d+(?:\.\d+)?s"
                         r"(?: \(\d+:\d\d:\d\d\))?(?: =+)?\s*$", re.M)
_RSPEC_RUN = re.compile(r"^\d+ examples?, \d+ failures?", re.M)
_NODE_RUN = re.compile(r"^ℹ tests \d+\s*$", re.M)
_JEST_RUN = re.compile(r"^Tests:\s+(?:\d+ \w+, )*\d+ total\s*$", re.M)  # jest's summary, once per run
# vitest's default reporter (` Test Files  1 failed | 1 passed (2)`) and mocha's spec (`  2 passing
# (5ms)`, printed whatever failed), once per run
_VITEST_RUN = re.compile(r"^\s*Test Files\s+.*\(\d+\)\s*$", re.M)
_MOCHA_RUN = re.compile(r"^\s*\d+ passing \(\d+(?:ms|s|m)\)\s*$", re.M)
_UVU_RUN = re.compile(r"^\s*Total:\s+\d+\s*$", re.M)  # uvu's summary (`  Total:     4`), once per run
# Each wrapper middle knows by name, with its own words for a target, env, session or recipe it does
# not have (the config's mistake: a check that cannot run). The wrappers the gate is enumerated on
# (tests/graph/gate_matrix.py asserts a row, or a documented exemption, for each name here).
WRAPPERS: dict[str, str] = {
    "make": r"^(make(?:\[\d+\])?: \*\*\* No rule to make target .*?)(?:\s+Stop\.)?$",
    "tox": r"^(?:ROOT: HandledError\| )?(provided environments not found in configuration file:?.*(?:\n\S.*)?)$",
    "nox": r"^(?:nox > )?(Sessions not found: .*)$",
    # `Justfile` before 1.x's lowercase `justfile`, and just with no justfile
    "just": r"^(?:error: )?([Jj]ustfile does not contain recipe .*|[Nn]o justfile found.*)$",
    # `hatch run nosuchenv:test`, and `hatch test -py 3.99` (no env of that Python)
    "hatch": r"^(Unknown environment: .*|No environments were selected)$",
    # a package script it does not have: npm (`npm error` 10, `npm ERR!` before), pnpm, yarn 1
    # (`error Command "tset" not found.`) and yarn berry
    "npm": r"^npm (?:error|ERR!) ?(Missing script: .*)$",
    "pnpm": r"^.*ERR_PNPM_NO_SCRIPT\W* ?(Missing script: .*)$",
    "yarn": r"^error (Command \"[^\"]*\" not found\.)$|^Usage Error: (Couldn't find a script named .*)$",
}
# pytest's usage error (exit 4), which the wrapper turns into its own exit code
_PYTEST_USAGE = r"^(pytest: error: .*|ERROR: file or directory not found: .*)$"
_CANNOT = re.compile("|".join([*WRAPPERS.values(), _PYTEST_USAGE]), re.M)


# make's line for a recipe that failed: `make[1]: *** [Makefile:7: lint] Error 3` (make 4.3), `make:
# *** [lint] Error 3` (older), `make: [Makefile:2: test] Error 1 (ignored)` (a `-` recipe line)
_MAKE_ERROR = re.compile(r"^make(?:\[\d+\])?: (?:\*\*\* )?\[(?:[^\]]*?:\d+: )?(?P<target>[^\]]+)\] "
                         r"(?P<error>Error \d+|Segmentation fault.*|Killed)(?P<ignored> \(ignored\))?\s*$", re.M)


@dataclass
class Runs:
    """The report files of one kind and how many runs of that runner the output shows."""

    kind: str  # "pytest" | "rspec" | "node-test" | "unittest" | "jest" | "vitest" | "mocha" | "uvu" | "node-script"
    files: list[Path]
    runs: int


def prepare(line: str, tmp: Path, environ: dict[str, str], cwd: Path | None = None
            ) -> tuple[str, dict[str, str], list[str]]:
    """The line unchanged; the environment that asks every env-carried runner for its report."""
    pytest_report = tmp / PYTEST_REPORT
    opts = " ".join(filter(None, [environ.get("PYTEST_ADDOPTS", ""), f"--junitxml={shlex.quote(str(pytest_report))}",
                                  "-o", "junit_family=xunit1", "--continue-on-collection-errors"]))
    env = {"PYTEST_ADDOPTS": opts}
    _, rspec_env, _ = rspec.prepare(line, tmp, environ)
    env |= {**rspec_env, "MIDDLE_RSPEC_JSON": str(tmp / RSPEC_REPORT)}
    # pytest's and node's as Keeper copies them, each version once; rspec's, one file per process
    reports = [str(tmp / KEPT / "*"), str(tmp / "rspec-*.json")]
    unittest_env, unittest_reports = pyunit.prepare(tmp, environ)  # one file per process, as rspec's
    env |= unittest_env
    reports += unittest_reports
    if _node_version(environ.get("PATH", "")) >= NODE_MIN:
        _, node_env, _ = node.prepare(line, tmp, environ)
        # jest, vitest, mocha: their bin's command line gains the report options (jest_argv.cjs)
        node_env["NODE_OPTIONS"] += f" --require={node.quote(str(JEST_ARGV))}"
        # uvu: its test API wrapped in uvu's own process, recording each test (uvu_preload.cjs)
        node_env["NODE_OPTIONS"] += f" --require={node.quote(str(UVU_PRELOAD))}"
        # a test file run by plain node (`node test.js`): one record per file, its exit code (node_script.py)
        node_env["NODE_OPTIONS"] += f" --require={node.quote(str(node_script.PRELOAD))}"
        node_env |= node_script.env(tmp, cwd)
        env |= node_env | {"MIDDLE_JEST_JSON": str(tmp / JEST_REPORT), "MIDDLE_VITEST_JSON": str(tmp / VITEST_REPORT),
                           "MIDDLE_MOCHA_JUNIT": str(tmp / MOCHA_REPORT), "MIDDLE_MOCHA_REPORTER": str(mocha.REPORTER),
                           "MIDDLE_UVU_JSON": str(tmp / UVU_REPORT)}
        reports += [str(tmp / "jest-*.json"), str(tmp / "vitest-*.json"), str(tmp / "mocha-*.xml"),
                    str(tmp / "uvu-*.json"), str(tmp / "node-script-*.json")]
    # go test lists every test with -v, which GOFLAGS carries (go build and go vet take it too and
    # name the packages they compile, on stderr; nothing else changes); cargo test gets
    # --no-fail-fast from middle's cargo first on PATH (cargo.py): both then read from the output
    env |= go.goflags(environ) | cargo.shim(tmp, environ)
    sections = ["testenv", "env_run_base", *_tox_envs(cwd)]
    overrides = ";".join(f"{section}.pass_env+={name}" for section in sections for name in TOX_PASS)
    env["TOX_OVERRIDE"] = ";".join(filter(None, [environ.get("TOX_OVERRIDE", ""), overrides]))
    return line, env, reports


_TOX_ENV_SECTION = re.compile(r"^\[(testenv:[\w.-]+)\]\s*$", re.M)


def _tox_envs(cwd: Path | None) -> list[str]:
    """The `testenv:NAME` sections of the project's tox.ini (the project's own file: unreadable is none)."""
    try:
        text = (cwd / "tox.ini").read_text(encoding="utf-8", errors="replace") if cwd else ""
    except OSError:
        return []
    return sorted(set(_TOX_ENV_SECTION.findall(text)))


@functools.lru_cache(maxsize=8)
def _node_version(path: str) -> int:
    """The major version of the `node` on PATH (0: none, or it would not say)."""
    exe = shutil.which("node", path=path or None)
    if not exe:
        return 0
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    found = re.match(r"v(\d+)\.", out.strip())
    return int(found.group(1)) if found else 0


class Keeper:
    """Copies every complete version of the reports a later run would overwrite (pytest's and
    `node --test`'s) into `into`, as the command runs: `with Keeper(tmp): <run>`, then `kept()`."""

    POLL_S = 0.05

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.into = tmp, tmp / KEPT
        self._seen: set[tuple[str, int, int]] = set()  # (name, mtime_ns, size) already looked at
        self._hashes: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="middle-report-keeper", daemon=True)

    def __enter__(self) -> "Keeper":
        self.into.mkdir(exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sweep()  # what the last run wrote just before the command ended

    def _loop(self) -> None:
        while not self._stop.wait(self.POLL_S):
            self.sweep()

    def sweep(self) -> None:
        for path in [*self.tmp.glob("pytest-*.xml"), *self.tmp.glob(NODE_REPORT)]:
            try:
                st = path.stat()
                key = (path.name, st.st_mtime_ns, st.st_size)
                if key in self._seen:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if not data.rstrip().endswith((b"</testsuites>", b"</testsuite>")):  # still being written: look again
                continue
            self._seen.add(key)
            digest = (path.name, hashlib.sha256(data).hexdigest())
            if digest not in self._hashes:
                self._hashes.add(digest)
                (self.into / f"{len(self._hashes):04d}-{path.name}").write_bytes(data)


def runs(files: list[Path], output: str) -> list[Runs]:
    """The reports written, by kind, beside how many runs of each runner the output shows."""
    def of(prefix: str) -> list[Path]:
        return [f for f in files if _KEPT_NUMBER.sub("", f.name).startswith(prefix)]
    return [Runs("pytest", of("pytest-"), len(_PYTEST_RUN.findall(output))),
            Runs(rspec.RUNNER, of("rspec-"), len(_RSPEC_RUN.findall(output))),
            Runs("node-test", of(NODE_REPORT), len(_NODE_RUN.findall(output))),
            Runs(pyunit.KIND, of("unittest-"), len(pyunit.RUN.findall(output))),
            Runs("jest", of("jest-"), len(_JEST_RUN.findall(output))),
            Runs("vitest", of("vitest-"), len(_VITEST_RUN.findall(output))),
            Runs("mocha", of("mocha-"), len(_MOCHA_RUN.findall(output))),
            Runs("uvu", of("uvu-"), len(_UVU_RUN.findall(output))),
            # a node script prints no summary: its record is written at its exit, one per process
            Runs(node_script.KIND, of("node-script-"), len(of("node-script-")))]


def incomplete(found: list[Runs]) -> str | None:
    """Why the reports cannot be trusted to hold every run (None: one report per run)."""
    for r in found:
        if r.files or r.runs:
            # rspec and unittest write one file per process; pytest one per tox env or nox session; node one in all
            if len(r.files) != r.runs:
                return (f"{r.kind} ran {r.runs} time(s) behind it and left {len(r.files)} report(s): "
                        f"judged by its exit code, not by a report that may miss a run's failures")
    return None


def read(found: list[Runs], cwd: Path) -> junit.JUnitReport:
    """Every run's tests, one test failing if it failed in any run."""
    report = junit.JUnitReport()
    for r in found:
        for path in r.files:
            one = (rspec.read([path]) if r.kind == rspec.RUNNER else node_script.read([path])
                   if r.kind == node_script.KIND else jest.read([path], cwd, by_location=True)
                   if r.kind == "jest" else jest.read([path], cwd) if r.kind in ("vitest", "uvu")
                   else junit.read([path]))
            for case in one.cases.values():
                seen = report.cases.get(case.ident)
                if seen is None or _rank(case) > _rank(seen):
                    report.cases[case.ident] = case
    return report


def _rank(case: junit.TestCase) -> int:
    """A failure in any run wins, then a run, then a skip."""
    return {junit.FAILED: 3, junit.ERROR: 3, junit.PASSED: 1, junit.SKIPPED: 0}[case.outcome]


def make_errors(output: str) -> list[str]:
    """Each recipe make says failed, as a failure: `(make) lint: Error 3`, `(make) test: Error 1 (ignored)`."""
    return [f"{MAKE_STEP}{m.group('target')}: {m.group('error').strip()}{m.group('ignored') or ''}"
            for m in _MAKE_ERROR.finditer(output)]


# make's line when it ran no recipe for the target asked: the target is a file or folder already
# there (`test/` beside `make test`, and no `.PHONY: test`). Not "Nothing to be done for 'all'":
# make says that too when the target's prerequisites' recipes ran and printed nothing (`@true`).
_MAKE_UP_TO_DATE = re.compile(r"^make(?:\[\d+\])?: '(?P<target>[^']+)' is up to date\.\s*$")
_MAKE_DIRECTORY = re.compile(r"^make(?:\[\d+\])?: (?:Entering|Leaving) directory ")


def ran_nothing(output: str) -> str | None:
    """Why a run that exited 0 ran nothing at all: make said each target asked was up to date (`make
    test` beside a `test/` folder and no `.PHONY: test`) and printed nothing else. Such a check
    passes on every ticket whatever it breaks, so it is a check that cannot run."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not _MAKE_DIRECTORY.match(ln.strip())]
    found = [_MAKE_UP_TO_DATE.match(ln) for ln in lines]
    if not lines or not all(found):
        return None
    targets = sorted({m.group("target") for m in found if m})
    names = ", ".join(f"'{t}'" for t in targets)
    return (f"make ran no recipe: {names} is up to date, since a file or folder of that name exists; "
            f"say `.PHONY: {' '.join(targets)}` in the Makefile")


# the test script `npm init` writes (`echo "Error: no test specified" && exit 1`): no test suite
_NPM_PLACEHOLDER = re.compile(r"^Error: no test specified\s*$", re.M)


def cannot_run(output: str) -> str | None:
    """A target, env, session or recipe the wrapper does not have (`make tset`), or npm's placeholder
    test script."""
    if _NPM_PLACEHOLDER.search(output):
        return ("the package's test script is the placeholder `npm init` writes (\"Error: no test "
                "specified\"): write its test script in package.json")
    found = _CANNOT.search(output)
    if not found:
        return None
    return " ".join(next(g for g in found.groups() if g).split())[:200]  # tox names the env on the next line


__all__ = ["MAKE_STEP", "NODE_MIN", "PYTEST_REPORT", "RUNNER", "WRAPPERS", "Keeper", "Runs", "cannot_run", "incomplete",
           "make_errors", "prepare", "ran_nothing", "read", "runs"]
