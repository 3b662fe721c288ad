"""Whether a ticket's check passes: compared with what the same check did on the commit the ticket
started from, failure by failure, so a project whose suite already fails is not blocked by
failures it did not cause, and no ticket gets through by making things worse.

- It passes on the ticket and runs every test the base ran: **passed**.
- It fails, and the base failed too, and both runs name their failures the same way (a JUnit
  report: test identities; diagnostics: (path, code, message) counted, line numbers left out):
  **no worse** when no failure is new (and no diagnostic more frequent), else **failed**.
- It fails and the base's failure names nothing comparable (no report, no diagnostics: read by its
  exit code): with the base's exit code and output (output_lines.py: each run's noise left out),
  **undecided** (whether the ticket made it worse cannot be told, and a correction would have
  nothing to go on); with another output, **failed** (the ticket changed what the check shows: the
  middle agent reads it and makes the check pass). With `baseline = "exit-code"` the same exit
  code and output is **no worse (as the base: exit N)**, and anything else **undecided**, naming
  the new lines.
- It passes on the ticket, the base failed, and the runs do not list every test (read by its exit
  code, or a go package run without -v): a fix cannot be told from a test removed or disabled, so
  when the ticket changed tests or the runner's configuration, or removed, disabled or edited a test
  inside a source file (a Rust `#[test]`'s body, a doctest's expected output: from its diff read
  against the base file; touched_tests.py), it is
  **undecided**, naming them; with none touched it is a fix, **passed**.
- A test file run by plain `node` (node_script.py) is one test judged by its exit code: failing on
  the base and again on the ticket, with nothing new failing elsewhere, it is **undecided** (its
  assertions after the first failing one ran in neither run); passing now after failing on the
  base, it is a fix only when the ticket touched no test (as above).
- **Undecided** never completes the ticket: it stops with its work kept, saying why and the ways
  out (orchestrator/graph/checking.py); no correction is asked of the middle agent, which could not
  tell either.
- Tests cannot be deleted away: a test the base ran that the ticket's run did not run (removed,
  skipped, marked xfail) is a failure like any other, unless the ticket allows it
  (`allow_removed_tests: true`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from orchestrator.checks import output_lines, touched_tests
from orchestrator.checks.runner import JUNIT, CheckResult
from orchestrator.checks.runners import node_script
from orchestrator.checks.runners.wrapper import MAKE_STEP
from orchestrator.config.settings import CheckCommand

PASSED = "passed"
NO_WORSE = "no-worse"  # failing, but only as the base already did
FAILED = "failed"
UNDECIDED = "undecided"  # middle cannot tell whether the ticket made it worse: a person decides
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
        return self.outcome in (PASSED, NO_WORSE)

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
          allow_removed_tests: bool = False, changed: list[str] | None = None,
          added: list[str] | None = None, diff: str = "", bases: dict[str, str] | None = None) -> Verdict:
    """The verdict of `result` (on the ticket) against `base` (the same command on its base commit).
    `changed`: the paths the ticket changed since the base (None: not known, so any may be a test);
    `added`: those of them new since the base; `diff`: the ticket's diff against the base of its
    changed source files (touched_tests.may_hold_tests), where a test inside a source file shows;
    `bases`: those files' text on the base commit, where the tests' lines are read."""
    spec = spec or CheckCommand(run=result.command)
    removed = [] if allow_removed_tests else removed_tests(result, base)
    if result.timed_out:
        return Verdict(FAILED, reason="it did not finish in time")
    if result.problem is not None:
        return Verdict(FAILED, reason=f"it could not run: {result.problem}")
    if result.passed:
        if removed:
            return Verdict(FAILED, removed_tests=removed, reason="tests the base ran did not run")
        # a file run by plain node that failed on the base passes now: fixed, or its failing
        # assertion taken out (node_script.py: nothing inside a file is named)
        if (base is not None and not base.passed and base.problem is None and not allow_removed_tests
                and (result.ran is None or base.ran is None or node_script.whole_files(base.failing or []))):
            return _passes_unlisted(result, changed, added or [], diff, bases)
        return Verdict(PASSED)
    if base is None:
        return Verdict(FAILED, new_failures=list(result.failing or []))
    if base.passed:
        return Verdict(FAILED, new_failures=list(result.failing or []), removed_tests=removed)
    if base.kind and result.kind == base.kind and base.failing is not None and result.failing is not None:
        new = sorted((Counter(result.failing) - Counter(base.failing)).elements())
        already = sorted(set(result.failing) & set(base.failing))
        whole = node_script.whole_files(already)
        if whole and not new and not removed:
            # a file run by plain node stops at its first failing assertion, on the base and on the
            # ticket: what follows it ran in neither, so "no worse" cannot be said of it
            return Verdict(UNDECIDED, already, reason=(
                "it already failed on the base in " + _shown([w.removesuffix(node_script.SUFFIX) for w in whole])
                + ", a test file run by plain node, judged by its exit code as a whole: it stops at its first "
                  "failing assertion, on the base as now, so whether this ticket broke one after it cannot be told"))
        return Verdict(FAILED if new or removed else NO_WORSE, already, new, removed)
    if base.kind and result.kind != base.kind:
        return Verdict(FAILED, new_failures=list(result.failing or []), removed_tests=removed,
                       reason="it failed without the report the base's run had, so its failures cannot be compared")
    if removed:
        return Verdict(FAILED, removed_tests=removed, reason="tests the base ran did not run")
    lines = output_lines.new_lines(result.output_lines, base.output_lines)
    same_exit = result.exit_code == base.exit_code and base.problem is None
    if spec.baseline == "exit-code" and same_exit and lines == []:
        return Verdict(NO_WORSE, by_exit_code=True)
    if spec.baseline == "exit-code":
        differs = (f"it exits {result.exit_code}, the base {base.exit_code}" if not same_exit
                   else "its output could not be compared with the base's (too long, or not kept)" if lines is None
                   else "its output has lines the base's did not: " + _shown(lines))
        return Verdict(UNDECIDED, reason=f"it already failed on the base and is read by its exit code alone "
                                         f"(baseline = \"exit-code\"); {differs}")
    if same_exit and lines == []:
        # it fails exactly as the base did: nothing it did shows, so a correction would have nothing
        # to go on, and "no worse" cannot be said of an output that names no test
        return Verdict(UNDECIDED, reason="it already failed on the base, fails with the same output, which names "
                                         "no failures middle can compare, so whether this ticket made it worse "
                                         "cannot be told")
    # its output changed: the ticket did something the check shows (for better or worse), so the
    # middle agent reads it and tries to make the check pass, as for a check the base passed
    said = "new in its output: " + _shown(lines) if lines else "its output differs from the base's"
    return Verdict(FAILED, new_failures=list(result.failing or []),
                   reason=f"it already failed on the base, names no failures that can be compared, and fails "
                          f"differently now ({said}): the ticket must make it pass")


def _passes_unlisted(result: CheckResult, changed: list[str] | None, added: list[str], diff: str,
                     bases: dict[str, str] | None) -> Verdict:
    """It passes now, the base failed, and the runs do not list every test: a fix, unless the
    ticket changed tests or the runner's config (or test code inside a source file, seen in its
    diff), through which a test is removed, disabled or made to pass."""
    touched = (touched_tests.which_are_tests(changed, result.command, added, diff, bases) if changed is not None
               else None)
    if touched == []:
        return Verdict(PASSED)
    what = ("the tests or the runner's config it changed: " + _shown(touched) if touched
            else "which files it changed is not known")
    return Verdict(UNDECIDED, reason="it passes now but failed on the base, and its run does not list every "
                                     "test, so a fix cannot be told from a test removed or disabled (" + what + ")")


def _shown(names: list[str]) -> str:
    shown = "; ".join(f"`{n}`" for n in names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def removed_tests(result: CheckResult, base: CheckResult | None) -> list[str]:
    """The tests the base ran that the ticket's run did not run: removed, skipped or marked xfail
    (each with what happened to it). Only between two JUnit runs."""
    if base is None or base.kind != JUNIT or result.kind != JUNIT or base.ran is None or result.ran is None:
        return []
    now_ran, now_skipped = set(result.ran), set(result.skipped or [])
    return [f"{t} (skipped)" if t in now_skipped else f"{t} (removed)" for t in base.ran if t not in now_ran]


__all__ = ["FAILED", "NO_WORSE", "PASSED", "UNDECIDED", "Verdict", "already_note", "check_label", "judge",
           "removed_tests"]
