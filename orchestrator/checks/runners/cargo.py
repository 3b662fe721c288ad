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


__all__ = ["COMMAND", "QUIET", "RUNNER", "add_no_fail_fast", "cannot_run", "parse"]
