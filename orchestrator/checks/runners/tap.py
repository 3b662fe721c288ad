"""A check whose output is TAP (the Test Anything Protocol) read test by test: bats, `prove -v`
(Perl), tape, node-tap, pg_prove and any home-grown runner printing `ok 1 - name` / `not ok 2 -
name` under a plan `1..N`. These print every test's outcome, so no report file is needed: a base
that already fails one test no longer forces a harmless ticket to make it pass (or to fall back on
the exit code), and a ticket breaking another test is named.

What is read (TAP 13 and 14, https://testanything.org/tap-version-14-specification.html):
- `ok` / `not ok`, an optional number, an optional description (after an optional `-`);
- the directives `# SKIP` (skipped) and `# TODO` (an expected failure: not counted as run, so
  a ticket marking a base test TODO reads as that test not run, as pytest's xfail does);
- subtests (`# Subtest: name`, then lines indented by 4): a child's identity is `parent > child`;
- YAML diagnostics blocks (`  ---` to `  ...` under a test line) are skipped;
- `Bail out!`: the stream stopped; it is a failure of its own (the tests after it did not run,
  which the verdict names against the base);
- fewer test lines than the plan announced (a runner that died part way): a failure of its own;
- `prove -v`'s file headers (`t/basic.t .. `): each file's tests are named under it.

A test's identity is its description (under its file or parent); a test with none is `test N`.
Same-named tests in one stream are numbered in their order (`name (2)`), as TAP runs them in
order. The test numbers are left out of identities: a test added above another renumbers it.

A line is TAP only in an output that has a plan line (`1..N`) or a `TAP version` line beside a
test line, so an ordinary log line starting "ok " is not read as a test.
"""

from __future__ import annotations

import re

from orchestrator.checks.junit import FAILED, PASSED, SKIPPED, JUnitReport, TestCase

RUNNER = "tap"
_VERSION = re.compile(r"^TAP version \d+\s*$", re.I)
_PLAN = re.compile(r"^(?P<indent>\s*)1\.\.(?P<n>\d+)(?:\s*#.*)?\s*$")
_TEST = re.compile(r"^(?P<indent>\s*)(?P<not>not )?ok(?=\s|$)(?:\s+(?P<num>\d+))?(?:\s*-)?\s*(?P<rest>.*)$")
_DIRECTIVE = re.compile(r"(?<!\\)#\s*(?P<word>skip|todo)\S*(?:\s+(?P<why>.*))?$", re.I)
_SUBTEST = re.compile(r"^(?P<indent>\s*)# Subtest(?::\s*(?P<name>.*))?\s*$")
_BAIL = re.compile(r"^\s*Bail out!\s*(?P<why>.*)$")
_YAML_START = re.compile(r"^(?P<indent>\s*)---\s*$")
# `prove -v` names each file before its stream: `t/basic.t .. ` (dots pad the names to one width)
_PROVE_FILE = re.compile(r"^(?P<file>\S+\.t)\s\.{2,}\s*$")
# tape's summary under its stream (`# tests 3`, `# pass  2`, `# fail  1`, `# ok`): the mark of
# tape's output, whose other comment lines name the tests under them
_TAPE_FOOTER = re.compile(r"^# tests\s+\d+\s*$", re.M)
_TAPE_COUNT = re.compile(r"^#\s*(?:tests|pass|fail|todo|skip)\s+\d+\s*$|^#\s*ok\s*$")


def looks_like(text: str) -> bool:
    """The output carries a TAP stream: a test line, and a plan line or a version line."""
    has_test = has_frame = False
    for line in text.splitlines():
        if not has_test and _TEST.match(line) and not line[:1].isspace():
            has_test = True
        elif not has_frame and (_PLAN.match(line) or _VERSION.match(line)):
            has_frame = True
        if has_test and has_frame:
            return True
    return False


def parse(text: str) -> JUnitReport:
    """Every test the TAP stream(s) in `text` report, with its outcome."""
    report = JUnitReport()
    seen: dict[str, int] = {}
    tape = bool(_TAPE_FOOTER.search(text))  # tape names its tests by comment lines (`# adds`)
    file = group = ""
    subtests: list[tuple[int, str]] = []  # (indent of the subtest's lines, its name), outermost first
    planned: int | None = None
    counted = 0  # top-level test lines of the stream being read
    yaml_end: str | None = None  # inside a YAML block: the indent of the line that ends it
    bailed = False

    def add(name: str, outcome: str) -> None:
        n = seen[name] = seen.get(name, 0) + 1
        report.add(TestCase(name if n == 1 else f"{name} ({n})", outcome))

    def close_stream() -> None:
        nonlocal planned, counted
        if planned is not None and counted < planned and not bailed:
            add(f"{file + '::' if file else ''}(planned {planned} tests, {counted} reported)", FAILED)
        planned, counted = None, 0

    for raw in text.splitlines():
        line = raw.rstrip()
        if yaml_end is not None:
            if line.strip() == "..." and line.startswith(yaml_end):
                yaml_end = None
            continue
        prove = _PROVE_FILE.match(line)
        if prove:
            close_stream()
            file, group, subtests = prove.group("file"), "", []
            continue
        bail = _BAIL.match(line)
        if bail:
            add(f"{file + '::' if file else ''}(bail out: {bail.group('why').strip()[:120]})", FAILED)
            bailed = True
            continue
        sub = _SUBTEST.match(line)
        if sub:
            depth = len(sub.group("indent"))
            subtests = [s for s in subtests if s[0] <= depth]
            subtests.append((depth + 4, (sub.group("name") or "").strip()))
            continue
        plan = _PLAN.match(line)
        if plan and not plan.group("indent"):
            if planned is None and counted:  # a plan at the end (tape, node-tap): this stream's
                planned = int(plan.group("n"))
                close_stream()
            else:  # a plan first: a new stream begins
                close_stream()
                planned = int(plan.group("n"))
            continue
        if tape and line.startswith("#") and not _TAPE_COUNT.match(line):
            group = line[1:].strip()
            continue
        test = _TEST.match(line)
        if not test:
            start = _YAML_START.match(line)
            if start and start.group("indent"):
                yaml_end = start.group("indent")
            continue
        depth = len(test.group("indent"))
        # the subtests this line is inside: those whose lines are indented at most as deep (a
        # parent's own line, under its children, is outside its subtest)
        subtests = [s for s in subtests if s[0] <= depth]
        if not depth:
            counted += 1
        rest = test.group("rest")
        directive = _DIRECTIVE.search(rest)
        description = (rest[:directive.start()] if directive else rest).strip().replace("\\#", "#")
        names = [n for n in (group if not depth else "", *(name for _, name in subtests)) if n]
        ident = " > ".join([*names, description or f"test {test.group('num') or counted}"])
        add(f"{file}::{ident}" if file else ident,
            SKIPPED if directive else FAILED if test.group("not") else PASSED)
        if not depth and planned is not None and counted >= planned:
            close_stream()  # the stream is whole: a plan after it belongs to the next one
    close_stream()
    return report


__all__ = ["RUNNER", "looks_like", "parse"]
