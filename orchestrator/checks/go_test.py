"""`go test` read from its own JSON events: `GOFLAGS` gains `-json` (go honours it for `go test`,
so the user's line is not rewritten), and each event names its package, test and outcome
(`{"Action":"fail","Package":"example.com/m","Test":"TestAdd"}`). What the run shows (its tail,
`middle log`) is the human output those events carry, the same as `go test -v`.

A test's identity is its package and its name, subtests included: `example.com/m::TestAdd`,
`example.com/m::TestTable/two_words` (go's own names, which `go test -run` takes). A package
that fails with no failing test (a panic in TestMain or init, a test binary's usage error) is one
failure, `example.com/m::(package failed)`; one that does not compile is `example.com/m::(build
failed)` (go before 1.24 prints `FAIL example.com/m [build failed]` as plain text, later ones a
`fail` event with `FailedBuild` and the compiler's text as `build-output` events).

No test result at all with a non-zero exit (nothing compiled, a usage error, a pattern that
matches no package) is a run that cannot run: on the base the config's error, on the ticket a
failure (a ticket that breaks the build must fail). `-json` is also known to `go vet`, so a line
that runs both has its vet output in JSON: give vet a command of its own (docs/checks.md).
"""

from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.checks.junit import FAILED, PASSED, SKIPPED, JUnitReport, TestCase

RUNNER = "go"
COMMAND = re.compile(r"(?:^|(?<=[\s;&|(]))go\s+test(?=\s|$|;|&|\|)")
_BUILD_FAILED = re.compile(r"^FAIL\s+(?P<pkg>\S+)(?: \[[^\]]*\])? \[(?:build|setup) failed\]\s*$")
_OUTCOMES = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}
_WHY = re.compile(r"\[(?:build|setup) failed\]|flag provided but not defined|^go: |^pattern |no Go files|"
                  r"cannot find|no required module")


def goflags(environ: dict[str, str]) -> dict[str, str]:
    """The environment that makes `go test` print JSON events (the user's GOFLAGS kept)."""
    return {"GOFLAGS": " ".join(filter(None, [environ.get("GOFLAGS", "").strip(), "-json"]))}


def _events(text: str) -> list[dict[str, Any] | str]:
    """Each line as its JSON event, or as the plain text it is (build errors are not JSON)."""
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


def readable(text: str) -> str:
    """The output as a person reads it: each event's own text, and the plain lines as they are."""
    parts = []
    for event in _events(text):
        if isinstance(event, str):
            parts.append(event + "\n")
        elif event["Action"] in ("output", "build-output") and isinstance(event.get("Output"), str):
            parts.append(event["Output"])
    return "".join(parts)


def parse(text: str) -> JUnitReport:
    """Every test's outcome, and a failure for each package that failed without a failing test."""
    report = JUnitReport()
    failed_pkgs: list[str] = []
    pkgs_with_failing_test: set[str] = set()
    for event in _events(text):
        if isinstance(event, str):
            built = _BUILD_FAILED.match(event)
            if built:
                report.add(TestCase(f"{built.group('pkg')}::(build failed)", FAILED, collection=True))
            continue
        pkg, test, outcome = str(event.get("Package") or ""), event.get("Test"), _OUTCOMES.get(event["Action"])
        if outcome is None:
            continue
        if isinstance(test, str) and test:
            report.add(TestCase(f"{pkg}::{test}", outcome))
            if outcome == FAILED:
                pkgs_with_failing_test.add(pkg)
        elif outcome == FAILED and event.get("FailedBuild"):
            report.add(TestCase(f"{pkg}::(build failed)", FAILED, collection=True))
        elif outcome == FAILED:
            failed_pkgs.append(pkg)
    for pkg in failed_pkgs:
        if pkg not in pkgs_with_failing_test and f"{pkg}::(build failed)" not in report.cases:
            report.add(TestCase(f"{pkg}::(package failed)", FAILED, collection=True))
    return report


def cannot_run(output: str) -> str | None:
    """Why a failed `go test` ran no test (it did not compile, a usage error), or None."""
    if any(not c.collection for c in parse(output).cases.values()):
        return None
    lines = [ln.strip() for ln in readable(output).splitlines() if ln.strip()]
    why = next((ln for ln in lines if _WHY.search(ln)), lines[-1] if lines else "no test result in its output")
    return "go test ran no test: " + why[:200]


__all__ = ["COMMAND", "RUNNER", "cannot_run", "goflags", "parse", "readable"]
