"""Whether a ticket's check passes: compared with what the same check did on the commit the ticket
started from, so a project whose suite already fails is not blocked by failures it did not cause.

- The check passes on the ticket: it passes.
- It fails on the ticket but failed on the base too: for pytest, it passes when no test fails
  that did not fail on the base (the failing ids are compared); for any other command, when it
  exits with the code it exited with on the base. Either way the run says which failures were
  already there.
- Otherwise it fails: the failure goes back to the middle agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.checks.runner import CheckResult

PASSED = "passed"
NO_WORSE = "no-worse"  # failing, but only as the base already did
FAILED = "failed"


@dataclass
class Verdict:
    """A check's outcome on the ticket against the base."""

    outcome: str  # PASSED | NO_WORSE | FAILED
    already_failing: list[str] = field(default_factory=list)  # pytest ids that failed on the base too
    new_failures: list[str] = field(default_factory=list)  # pytest ids that fail only on the ticket

    @property
    def ok(self) -> bool:
        return self.outcome != FAILED


def judge(result: CheckResult, base: CheckResult | None) -> Verdict:
    """The verdict of `result` (on the ticket) against `base` (the same command on its base commit)."""
    if result.passed:
        return Verdict(PASSED)
    if base is None or base.passed or result.timed_out:
        return Verdict(FAILED, new_failures=list(result.failing or []))
    if result.failing is not None and base.failing is not None:
        before = set(base.failing)
        new = [t for t in result.failing if t not in before]
        already = [t for t in result.failing if t in before]
        return Verdict(FAILED if new else NO_WORSE, already, new)
    if result.failing is None and base.failing is None and result.exit_code == base.exit_code:
        return Verdict(NO_WORSE)
    return Verdict(FAILED, new_failures=list(result.failing or []))
