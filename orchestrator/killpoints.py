"""Named kill points: every write a run makes to shared state and every side effect it has
outside the store passes through `point(name)`, so a test can kill the process (SIGKILL: no
handler, no cleanup, as a machine that dies) exactly there and prove that a takeover loses
nothing and repeats nothing (tests/graph/test_killpoints.py, the sweep in docs/runs.md).

The switch is test-only: `MIDDLE_KILL_AT=<point>:<n>` kills the process at the n-th time it
passes that point (n defaults to 1). Unset, `point` is one comparison.

POINTS is the one list of them: the calls name only these (checked at the call, and by a test
that reads the code), and the sweep enumerates them from here.
"""

from __future__ import annotations

import os
import signal
from typing import NamedTuple

from orchestrator.errors import ConfigError

VARIABLE = "MIDDLE_KILL_AT"


class Point(NamedTuple):
    name: str
    what: str  # what has just happened when a kill lands there
    in_run: bool = True  # visited by a ticket's run (False: a command apart from runs, e.g. a PR)


POINTS: tuple[Point, ...] = (
    Point("run.fields", "a run field was written (plan, worktree, commit, check status)"),
    Point("turn.started", "a turn's prompt and session id were stored (before Claude Code starts)"),
    Point("wip.committed", "the turn's work in progress was committed to the local wip ref"),
    Point("wip.pushed", "the turn's work in progress was pushed to the shared repository"),
    Point("turn.finished", "the turn's result was stored (turns.response set)"),
    Point("turn.assessed", "the middle agent's assessment of a turn was stored"),
    Point("event.written", "a run event was written"),
    Point("checkpoint.put", "a graph checkpoint was written"),
    Point("check.baseline", "a check command's result on the base commit was stored"),
    Point("branch.committed", "the ticket's commit was made on its branch (not pushed yet)"),
    Point("branch.pushed", "the ticket's branch was pushed to the shared repository"),
    Point("wip.dropped", "the work-in-progress ref was removed (the commit holds the work)"),
    Point("memory.kept", "the completion doc was kept with the ticket, pending"),
    Point("memory.indexed", "the completion doc was indexed in memory (not yet marked indexed)"),
    Point("memory.marked", "the completion doc was marked indexed"),
    Point("memory.observed", "a turn's round was given to memory's conversation-watching backends "
          "(observe_round); the store not told yet"),
    Point("turn.hooked", "the plugins' on_turn_end hook ran for a turn; the store not told yet"),
    Point("memory.retired", "a later round deleted the ticket's earlier completion docs from memory (its "
          "own indexed); the store not told yet"),
    Point("run.ended", "the run's end was stored (status, run_end, claim released); a complete or failed "
          "one's end hooks ran"),
    Point("run.hooks", "the run's end was stored; its end hooks not run yet (a complete round's open pull "
          "request not brought up to date, `[run] on_complete = \"pr\"` not opened)"),
    Point("run.hooked", "a plugin's end hook (on_ticket_complete, on_ticket_failed) ran; its record (end_hooks) not "
          "written yet"),
    Point("run.hooks_recorded", "every plugin's end hook of the run ran and was recorded (end_hooks); the run's "
          "hooks_due not cleared yet"),
    Point("pr.opened", "a pull request was opened on GitHub", in_run=False),
    Point("pr.proposed", "a pull request was opened or brought up to date (`middle pr`, a run's end hook, "
          "`middle sync`'s catch-up) and recorded; the run's pr_due not cleared yet", in_run=False),
    Point("pr.read", "`middle sync` recorded that GitHub merged or closed a ticket's pull request "
          "(run's pr_state and the ticket's status, one transaction); said not yet", in_run=False),
    Point("pr.signals", "a review round that a pull request's CI or reviews asked for ended (`middle sync` "
          "ran it; the signals it acted on recorded with its claim); the next pull request not read yet",
          in_run=False),
    Point("base.advanced", "a merge or revert moved the base branch (pushed first in a team); the "
          "ticket not marked yet", in_run=False),
    # `middle revert` / `middle discard` (CLI, HTTP API, board: one Review) of a ticket with memory docs
    Point("forget.deleted", "a revert or discard deleted the ticket's memory docs (the store not marked "
          "yet, the ticket not marked reverted or discarded)", in_run=False),
    Point("forget.marked", "a revert or discard marked the ticket's memory docs deleted in the store (the "
          "ticket not marked reverted or discarded yet)", in_run=False),
    # `middle feedback ID "..."` (CLI, HTTP API, a pull request's CI or review)
    Point("round.claimed", "a review round was claimed and its feedback stored (one transaction); the "
          "round's run not started yet", in_run=False),
    Point("retry.taken", "a worker took a due retry of a passing failure (its resume not claimed yet)",
          in_run=False),
    # `middle memory import` and the curation verbs (CLI, HTTP API, board: one Curator)
    Point("import.indexed", "an import's batch was indexed (its origins and the import record not yet)",
          in_run=False),
    Point("import.noted", "a git import's batch's origins were recorded (the import record not moved yet)",
          in_run=False),
    Point("memory.curated", "a curation verb indexed a doc (add, supersede, edit, an undo putting a doc "
          "back); its change not recorded yet", in_run=False),
    Point("memory.removed", "an undo deleted a doc (of an add, of a supersede's replacement); its change "
          "not recorded yet", in_run=False),
    Point("memory.recorded", "a curation change was recorded (forget, edit, undo of an edit); the doc "
          "it removes not deleted yet", in_run=False),
)
NAMES = frozenset(p.name for p in POINTS)


def _armed() -> tuple[str, int] | ConfigError | None:
    """The point and count MIDDLE_KILL_AT names; a mistyped value is said at the first point
    (never at import, which the CLI's error handling does not cover)."""
    raw = os.environ.get(VARIABLE, "").strip()
    if not raw:
        return None
    name, _, count = raw.partition(":")
    if name not in NAMES or (count and not count.isdigit()) or (count and int(count) < 1):
        return ConfigError(f"{VARIABLE}={raw!r} names no kill point: use <point>:<n> (n >= 1) with a point "
                           f"of {', '.join(sorted(NAMES))}")
    return name, int(count or 1)


_ARMED = _armed()
_seen: dict[str, int] = {}


def point(name: str) -> None:
    """A named point of a run: the process kills itself here when MIDDLE_KILL_AT names it."""
    if _ARMED is None:
        return
    if isinstance(_ARMED, ConfigError):
        raise _ARMED
    if name not in NAMES:  # a call naming a point POINTS lacks is a bug of the code, said at once
        raise ValueError(f"kill point {name!r} is not in orchestrator.killpoints.POINTS")
    if name != _ARMED[0]:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] == _ARMED[1]:
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["NAMES", "POINTS", "Point", "VARIABLE", "point"]
