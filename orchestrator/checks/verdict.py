"""Whether a ticket's check passes: compared with what the same check did on the commit the ticket
started from, failure by failure, so a project whose suite already fails is not blocked by
failures it did not cause, and no ticket gets through by making things worse.

- It passes on the ticket and runs every test the base ran: **passed**.
- It fails, and the base failed too, and both runs name their failures the same way (a JUnit
  report: test identities; diagnostics: (path, code, message) counted, line numbers left out):
  **no worse** when no failure is new (and no diagnostic more frequent), else **failed**.
- It fails and the base's failure names nothing comparable: **failed** (the ticket must make the
  check pass), unless the command says `baseline = "exit-code"`: then failing with the base's
  exit code is **no worse (as the base: exit N)**.
- Tests cannot be deleted away: a test the base ran that the ticket's run did not run (removed,
  skipped, marked xfail) is a failure like any other, unless the ticket allows it
  (`allow_removed_tests: true`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from orchestrator.checks.runner import JUNIT, CheckResult
from orchestrator.checks.runners.wrapper import MAKE_STEP
from orchestrator.config.settings import CheckCommand

PASSED = "passed"
NO_WORSE = "no-worse"  # failing, but only as the base already did
FAILED = "failed"
SHOWN_NAMES = 5  # failures named on one line (the log has them all)


@dataclass
class Verdict:
    """A check's outcome on the ticket against the base."""

    outcome: str  # PASSED | NO_WORSE | FAILED
    already_failing: list[str] = field(default_factory=list)  # failures the base had too
    new_failures: list[str] = field(default_factory=list)  # failures only the ticket has
    removed_tests: list[str] = field(default_factory=list)  # base tests the ticket's run did not run
    by_exit_code: bool = False  # judged by the exit code alone (baseline = "exit-code")
    reason: str = ""  # why it failed, when its failures do not say (the base passed, no report...)

    @property
    def ok(self) -> bool:
        return self.outcome != FAILED

    def label(self, base_exit: int | None = None) -> str:
        """What the check column, the log and a pull request say: `passed`, `no worse (...)`, `failed`."""
        if self.outcome != NO_WORSE:
            return self.outcome
        return f"no worse ({self.note(base_exit)})"

    def note(self, base_exit: int | None = None) -> str:
        if self.by_exit_code:
            return f"failing as on the base: exit {base_exit}" if base_exit is not None else "failing as on the base"
        return already_note(self.already_failing)


def check_label(status: str | None, note: str | None = None) -> str:
    """A run's check as every view shows it (`middle tickets`, `middle log`, the board, a pull
    request): `passed`, `no worse (N already failing on the base: names)`, `failed`."""
    if status == NO_WORSE:
        return f"no worse ({note})" if note else "no worse than the base"
    return status or "-"


def already_note(names: list[str]) -> str:
    """`N already failing on the base: a, b, ...`. make's line for a recipe that failed is left out
    where tests are named (it is the recipe that ran them: `(make) test: Error 1` beside the test
    says nothing more); it is still among the failures compared, and named when it is new."""
    names = [n for n in names if not n.startswith(MAKE_STEP)] or names
    shown = ", ".join(names[:SHOWN_NAMES]) + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES
                                               else "")
    return f"{len(names)} already failing on the base" + (f": {shown}" if names else "")


def judge(result: CheckResult, base: CheckResult | None, spec: CheckCommand | None = None, *,
          allow_removed_tests: bool = False) -> Verdict:
    """The verdict of `result` (on the ticket) against `base` (the same command on its base commit)."""
    spec = spec or CheckCommand(run=result.command)
    removed = [] if allow_removed_tests else removed_tests(result, base)
    if result.timed_out:
        return Verdict(FAILED, reason="it did not finish in time")
    if result.problem is not None:
        return Verdict(FAILED, reason=f"it could not run: {result.problem}")
    if result.passed:
        if removed:
            return Verdict(FAILED, removed_tests=removed, reason="tests the base ran did not run")
        return Verdict(PASSED)
    if base is None:
        return Verdict(FAILED, new_failures=list(result.failing or []))
    if base.passed:
        return Verdict(FAILED, new_failures=list(result.failing or []), removed_tests=removed)
    if base.kind and result.kind == base.kind and base.failing is not None and result.failing is not None:
        new = sorted((Counter(result.failing) - Counter(base.failing)).elements())
        already = sorted(set(result.failing) & set(base.failing))
        return Verdict(FAILED if new or removed else NO_WORSE, already, new, removed)
    if spec.baseline == "exit-code" and result.exit_code == base.exit_code and base.problem is None:
        return Verdict(FAILED if removed else NO_WORSE, removed_tests=removed, by_exit_code=True)
    if base.kind and result.kind != base.kind:
        reason = "it failed without the report the base's run had, so its failures cannot be compared"
    else:
        reason = ("it already failed on the base naming no failures that can be compared, so the ticket "
                  "must make it pass (or the command says baseline = \"exit-code\")")
    return Verdict(FAILED, new_failures=list(result.failing or []), removed_tests=removed, reason=reason)


def removed_tests(result: CheckResult, base: CheckResult | None) -> list[str]:
    """The tests the base ran that the ticket's run did not run: removed, skipped or marked xfail
    (each with what happened to it). Only between two JUnit runs."""
    if base is None or base.kind != JUNIT or result.kind != JUNIT or base.ran is None or result.ran is None:
        return []
    now_ran, now_skipped = set(result.ran), set(result.skipped or [])
    return [f"{t} (skipped)" if t in now_skipped else f"{t} (removed)" for t in base.ran if t not in now_ran]


__all__ = ["FAILED", "NO_WORSE", "PASSED", "Verdict", "already_note", "check_label", "judge", "removed_tests"]
