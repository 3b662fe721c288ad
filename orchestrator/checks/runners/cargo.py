"""`cargo test` read from its own output: libtest prints every test with its outcome
(`test tests::adds ... ok`), under the test binary it belongs to (`Running unittests src/lib.rs
(target/debug/deps/calc-HASH)`, `Running tests/api.rs (...)`, `Doc-tests calc`), so no report is
needed and nothing in the user's line changes but one option: `--no-fail-fast` (inserted right
after `cargo test`), without which cargo stops at the first failing binary, and a base whose unit
tests fail would never run its integration tests, nor would the ticket's (a ticket breaking them
would read as "no worse").

A test's identity is its binary's source and name (the build HASH left out: it changes between
builds) and its libtest path: `src/lib.rs (calc)::tests::adds`, `tests/api.rs (api)::adds_numbers`,
`doc-tests (calc)::src/lib.rs - add`. A doc-test's name carries the line of its example
(`src/lib.rs - add (line 5)`): it is left out, so an edit above the example does not read as one
doc-test removed and another added; two examples on one item are told apart by the order of
their lines (`... - add (2)`), not of the output (doc-tests print as they finish).

`cargo test -q` prints dots, not names: nothing is read and the run is judged by its exit code
(docs/checks.md). No test result at all with a non-zero exit (the tests did not compile, a usage
error) is a run that cannot run: on the base the config's error, on the ticket a failure (a
ticket that breaks the build must fail).
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from orchestrator.checks.junit import FAILED, PASSED, SKIPPED, JUnitReport, TestCase

RUNNER = "cargo"
# `cargo test`, `cargo +nightly test`, run directly by the line (not `cargo nextest`, `cargo test-x`)
COMMAND = re.compile(r"(?:^|(?<=[\s;&|(]))cargo(?:\s+\+\S+)?\s+test(?=\s|$|;|&|\|)")
# `-q` (to cargo or to libtest) prints a dot per test, not its name: nothing to read test by test
QUIET = re.compile(r"cargo(?:\s+\+\S+)?\s+test\b[^;&|]*?\s(?:-q|--quiet)(?=\s|$|;|&|\|)")
# cargo right-aligns its status words (`     Running`): a test's own "Running x" printed at the
# start of a line is not a binary
_RUNNING = re.compile(r"^\s+Running (?:unittests )?(?P<src>.+?)(?: \((?P<bin>[^()]+)\))?\s*$")
_DOCTESTS = re.compile(r"^\s+Doc-tests (?P<crate>\S+)\s*$")
_TEST = re.compile(r"^test (?P<name>.+?) \.\.\. (?P<outcome>ok|FAILED|ignored)\b")
# `-- --nocapture --test-threads=1`: what the test prints follows `test name ... `, and its
# outcome comes later on a line of its own
_STARTED = re.compile(r"^test (?P<name>.+?) \.\.\. ")
_LATE_OUTCOME = re.compile(r"^(?P<outcome>ok|FAILED|ignored)(?:, .*)?$")
_DOC_LINE = re.compile(r" \(line (\d+)\)")
_HASH = re.compile(r"-[0-9a-f]{16}(?:\.exe)?$")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # CARGO_TERM_COLOR=always


def add_no_fail_fast(line: str) -> str:
    """`cargo test` with `--no-fail-fast` right after it (unless the line says it already)."""
    if "--no-fail-fast" in line:
        return line
    return COMMAND.sub(lambda m: m.group(0) + " --no-fail-fast", line)


def parse(text: str) -> JUnitReport:
    """Every test libtest printed, with its outcome, under the binary it ran in."""
    report = JUnitReport()
    target = ""
    tests: list[tuple[str, int, str]] = []  # this binary's (name, line of its example, outcome word)
    started = ""  # a test whose outcome is still to come (it printed after its name)
    for line in _COLOUR.sub("", text).splitlines():
        running = _RUNNING.match(line)
        doc = _DOCTESTS.match(line)
        if running or doc:
            _add(report, target, tests)
            target = (_target(running.group("src"), running.group("bin")) if running
                      else f"doc-tests ({doc.group('crate')})" if doc else "")
            tests, started = [], ""
            continue
        test = _TEST.match(line)
        late = _LATE_OUTCOME.match(line.strip()) if started and not test else None
        if test:
            name, word = test.group("name"), test.group("outcome")
        elif late:
            name, word, started = started, late.group("outcome"), ""
        else:
            began = _STARTED.match(line)
            started = began.group("name") if began else started
            continue
        at = _DOC_LINE.search(name)
        tests.append((name, int(at.group(1)) if at else 0, word))
    _add(report, target, tests)
    return report


def _add(report: JUnitReport, target: str, tests: list[tuple[str, int, str]]) -> None:
    """One binary's tests. Same-named ones (a crate's or an item's several doc examples: `src/lib.rs -
    (line 14)`, `src/lib.rs - (line 37)`) are numbered in the order of their lines, not of the
    output: doc-tests run in parallel and print as they finish, so the base's `... (3)` would be
    another example's `(2)` on the ticket."""
    seen: dict[str, int] = {}
    for name, _, word in sorted(tests, key=lambda t: t[1]):  # a stable sort: the output order otherwise
        ident = f"{target}::{_DOC_LINE.sub('', name)}" if target else name
        n = seen[ident] = seen.get(ident, 0) + 1
        if n > 1:
            ident = f"{ident} ({n})"
        report.add(TestCase(ident, {"ok": PASSED, "FAILED": FAILED, "ignored": SKIPPED}[word]))


def _target(src: str, binary: str | None) -> str:
    """`src/lib.rs (calc)` from `src/lib.rs (target/debug/deps/calc-HASH)`; an older cargo's
    `Running target/debug/deps/calc-HASH` or `Running unittests (target/debug/deps/calc-HASH)`
    (no source) gives `calc`."""
    if binary is None:
        return _HASH.sub("", src.strip().strip("()").rsplit("/", 1)[-1])
    return f"{src.strip()} ({_HASH.sub('', binary.strip().rsplit('/', 1)[-1])})"


def cannot_run(output: str) -> str | None:
    """Why a failed `cargo test` ran no test (it did not compile, a usage error), or None."""
    if parse(output).cases:
        return None
    errors = [ln.strip() for ln in output.splitlines() if ln.startswith("error")]
    return "cargo test ran no test: " + (errors[-1][:200] if errors else "no test result in its output")


# -- behind a wrapper (`make test` running `cargo test`) -------------------------------------------
# cargo takes --no-fail-fast only on its command line, which a Makefile or a script holds, so a
# `cargo` of middle's goes first on PATH: it runs the real one, `test` gaining --no-fail-fast (once:
# cargo refuses it twice), anything else as it is. A cargo called by its full path, or a PATH the
# wrapper resets, is missed: cargo then stops at its first failing test binary and says so
# (`STOPPED`), and the run is judged as incomplete (runner.py), never as every test.
SHIM = """#!/bin/sh
# middle's cargo (orchestrator/checks/runners/cargo.py): `cargo test` gains --no-fail-fast
tc=
case "$1" in +*) tc=$1; shift ;; esac
if [ "$1" = test ]; then
  shift
  nff=--no-fail-fast
  for a in "$@"; do
    [ "$a" = -- ] && break
    [ "$a" = --no-fail-fast ] && nff=
  done
  set -- test $nff "$@"
fi
exec %s ${tc:+"$tc"} "$@"
"""
# cargo's words after a failing binary (`error: test failed, to rerun pass `--lib``): with
# --no-fail-fast the next binary's `Running`/`Doc-tests` line or the closing `error: 1 target
# failed:` follows; without it, cargo stopped there, and the binaries after it did not run
_FAILED_BINARY = re.compile(r"^error: test failed, to rerun pass ")
_ALL_FAILED = re.compile(r"^error: \d+ targets? failed:")
# libtest's closing line of one binary's tests, with cargo's `Running`/`Doc-tests` line naming it:
# together they are cargo's output, not another runner's `test x ... ok`
_RESULT = re.compile(r"^test result: (?:ok|FAILED)\. \d+ passed; \d+ failed;", re.M)


def shim(tmp: Path, environ: dict[str, str]) -> dict[str, str]:
    """PATH with middle's cargo first (nothing when no cargo is on PATH)."""
    path = environ.get("PATH", "")
    real = shutil.which("cargo", path=path or None)
    if not real:
        return {}
    folder = tmp / "cargo-bin"
    folder.mkdir(exist_ok=True)
    exe = folder / "cargo"
    exe.write_text(SHIM % shlex.quote(real), encoding="utf-8")
    exe.chmod(0o755)
    return {"PATH": f"{folder}:{path}" if path else str(folder)}


def stopped(text: str) -> bool:
    """Whether a `cargo test` in the output stopped at its first failing binary (fail-fast)."""
    waiting = False  # after a failing binary's line, before cargo's next word
    for line in _COLOUR.sub("", text).splitlines():
        if _FAILED_BINARY.match(line):
            waiting = True
        elif waiting and (_RUNNING.match(line) or _DOCTESTS.match(line) or _ALL_FAILED.match(line)):
            waiting = False
        elif waiting and line.strip() and not line.startswith(" "):
            return True  # another command's output (make's error line): cargo ended there
    return waiting


def in_output(text: str) -> JUnitReport | None:
    """The tests of the `cargo test` runs a wrapper's output shows (None: it shows none): lines
    libtest prints without being asked, under the binary cargo names for them."""
    plain = _COLOUR.sub("", text)
    if not _RESULT.search(plain) or not any(_RUNNING.match(ln) or _DOCTESTS.match(ln) for ln in plain.splitlines()):
        return None
    report = parse(plain)
    return report if report.cases else None


__all__ = ["COMMAND", "QUIET", "RUNNER", "add_no_fail_fast", "cannot_run", "in_output", "parse", "shim", "stopped"]
