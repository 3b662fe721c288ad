"""`go test` read from its own output: `GOFLAGS` gains `-v` (go honours it for `go test`, so the
user's line is not rewritten), and go then prints every test with its outcome (`--- PASS:
TestAdd (0.00s)`, subtests indented), each package's together and closed by its summary line
(`ok  <tab>example.com/m<tab>0.01s`, `FAIL<tab>example.com/m<tab>0.01s`). `-v`, not `-json`:
`-json` is known to `go list` and `go vet` too, and a line such as `go test $(go list ./...)`
would get JSON where it wants package names; `-v` changes neither's output. A line that asks for
`-json` itself is read from its events (and shown as their text).

A test's identity is its package and its name, subtests included: `example.com/m::TestAdd`,
`example.com/m::TestTable/two_words` (go's own names, which `go test -run` takes). A package
that fails with no failing test (a panic in TestMain or init, a test binary's usage error) is one
failure, `example.com/m::(package failed)`; one that does not compile (`FAIL example.com/m [build
failed]`) is `example.com/m::(build failed)`.

No test result at all with a non-zero exit (nothing compiled, a usage error, a pattern that
matches no package) is a run that cannot run: on the base the config's error, on the ticket a
failure (a ticket that breaks the build must fail).
"""

from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.checks.junit import FAILED, PASSED, SKIPPED, JUnitReport, TestCase
from orchestrator.checks.runners import bail

RUNNER = "go"
COMMAND = re.compile(r"(?:^|(?<=[\s;&|(]))go\s+test(?=\s|$|;|&|\|)")
# A test's outcome (`-v`): the name has no spaces (go writes a subtest's as underscores), the
# duration is always there; what the test printed may precede it on the same line.
_OUTCOME = re.compile(r"--- (?P<outcome>PASS|FAIL|SKIP): (?P<name>\S+) \([\d.]+s\)\s*$")
# A package's summary, as go prints it (tab-separated), closing that package's output
_SUMMARY = re.compile(r"^(?P<status>ok  |FAIL|\?   )\t(?P<pkg>\S+?)(?P<rest>\t.*| \[.*)?$")
_BUILD_FAILED = re.compile(r"\[(?:build|setup) failed\]")
_OUTCOMES = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED, "PASS": PASSED, "FAIL": FAILED, "SKIP": SKIPPED}
_WHY = re.compile(r"\[(?:build|setup) failed\]|flag provided but not defined|^go: |^pattern |no Go files|"
                  r"cannot find|no required module")


# `-failfast` stops a package's tests at its first failure: where the base already fails one,
# both runs would stop there, before a test the ticket breaks after it (runners/bail.py)
_FAILFAST = re.compile(r"(?<=\s)--?failfast(?:=(?:true|1))?(?=\s|$)")


def without_failfast(line: str) -> str:
    """The line with `go test`'s own `-failfast` taken out (only from go test's command)."""
    return bail.without(line, COMMAND, _FAILFAST)


def goflags(environ: dict[str, str]) -> dict[str, str]:
    """The environment that makes `go test` list every test (the user's GOFLAGS kept)."""
    return {"GOFLAGS": " ".join(filter(None, [environ.get("GOFLAGS", "").strip(), "-v"]))}


def _events(text: str) -> list[dict[str, Any] | str]:
    """Each line as its JSON event (a line that asked for `-json`), or as the plain text it is."""
    out: list[dict[str, Any] | str] = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if isinstance(event, dict) and isinstance(event.get("Action"), str):
                out.append(event)
                continue
        out.append(line)
    return out


# A line that is an import path alone (`internal/cpu`, `fmt`, `example.com/m/pkg`): what `go vet` and
# `go build` print, one per package they compile, under the GOFLAGS=-v middle gives go test
_PACKAGE_LINE = re.compile(r"^[a-z][\w.-]*(?:/[\w.~-]+)*$")
PACKAGE_RUN = 5  # this many such lines in a row are a list, not a program's own words


def without_package_lists(text: str) -> str:
    """The output with each run of package-name lines (`go vet -v` lists the standard library's
    too, dozens of lines that would fill the end of the output the middle agent reads) said in one
    line instead."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if line and _PACKAGE_LINE.match(line.strip()) and line.strip() == line.rstrip("\r\n"):
            run.append(line)
            continue
        if len(run) >= PACKAGE_RUN:
            out.append(f"[go: {len(run)} packages listed ({run[0].strip()} ... {run[-1].strip()}), GOFLAGS=-v]\n")
        else:
            out.extend(run)
        run = []
        out.append(line)
    return "".join(out)


def readable(text: str) -> str:
    """The output as a person reads it: JSON events as their own text, other lines as they are."""
    events = _events(text)
    if not any(isinstance(e, dict) for e in events):
        return text
    parts = []
    for event in events:
        if isinstance(event, str):
            parts.append(event + "\n")
        elif event["Action"] in ("output", "build-output") and isinstance(event.get("Output"), str):
            parts.append(event["Output"])
    return "".join(parts)


def _by_package(text: str) -> list[str]:
    """The output as each package's own text. `go test -json ./...` runs packages at once and
    their events interleave (package B's summary between package A's `--- FAIL` and A's own
    summary), so the events are read package by package, each in its own order; `-v` text is
    printed a package at a time already. Lines that are no event are a text of their own."""
    events = _events(text)
    if not any(isinstance(e, dict) for e in events):
        return [text]
    texts: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, str):
            texts.setdefault("", []).append(event + "\n")
        elif event["Action"] in ("output", "build-output") and isinstance(event.get("Output"), str):
            key = str(event.get("Package") or event.get("ImportPath") or "")
            texts.setdefault(key, []).append(event["Output"])
    return ["".join(parts) for parts in texts.values()]


def parse(text: str) -> JUnitReport:
    """Every test's outcome, and a failure for each package that failed without a failing test."""
    report = JUnitReport()
    for own in _by_package(text):
        _parse_text(own, report)
    return report


def _parse_text(text: str, report: JUnitReport) -> None:
    """Add the tests of go's text output (packages one after another) to the report."""
    pending: list[tuple[str, str]] = []  # (name, outcome) of the package whose summary is still to come
    failed_without_test: list[tuple[str, str]] = []  # (package, why)
    for line in text.splitlines():
        outcome = _OUTCOME.search(line)
        if outcome:
            pending.append((outcome.group("name"), _OUTCOMES[outcome.group("outcome")]))
            continue
        summary = _SUMMARY.match(line)
        if not summary:
            continue
        pkg = summary.group("pkg")
        for name, result in pending:
            report.add(TestCase(f"{pkg}::{name}", result))
        if summary.group("status") == "FAIL" and not any(result == FAILED for _, result in pending):
            built = _BUILD_FAILED.search(summary.group("rest") or "")
            failed_without_test.append((pkg, "(build failed)" if built else "(package failed)"))
        pending = []
    for pkg, why in failed_without_test:
        report.add(TestCase(f"{pkg}::{why}", FAILED, collection=True))


def quiet_packages(text: str) -> list[str]:
    """The packages whose tests passed with none listed (`ok  <tab>pkg<tab>0.01s` and no `--- PASS`
    before it): go ran without -v there (a GOFLAGS the wrapper set itself), so which of their tests
    ran is unknown. `[no tests to run]` is a package with none."""
    quiet: list[str] = []
    for own in _by_package(text):
        listed = False
        for line in own.splitlines():
            if _OUTCOME.search(line):
                listed = True
                continue
            summary = _SUMMARY.match(line)
            if not summary:
                continue
            rest = summary.group("rest") or ""
            if summary.group("status") == "ok  " and not listed and "[no tests to run]" not in rest:
                quiet.append(summary.group("pkg"))
            listed = False
    return quiet


def cannot_run(output: str) -> str | None:
    """Why a failed `go test` ran no test (it did not compile, a usage error), or None."""
    if any(not c.collection for c in parse(output).cases.values()):
        return None
    lines = [ln.strip() for ln in readable(output).splitlines() if ln.strip()]
    why = next((ln for ln in lines if _WHY.search(ln)), lines[-1] if lines else "no test result in its output")
    return "go test ran no test: " + why[:200]


__all__ = ["COMMAND", "RUNNER", "cannot_run", "goflags", "parse", "quiet_packages", "readable", "without_failfast",
           "without_package_lists"]
