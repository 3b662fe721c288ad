"""What to do next with a ticket, written once: (its situation, the command tried) -> the advice.

Every message that suggests a command takes it from TABLE, so no two messages send the user in a
circle (`middle merge` of a failed ticket saying `middle resume`, which said `middle run`, which
refused). The commands repeat how this process was started (`--config FILE`, `--fake`, or a run
that was offline), so a suggestion works as it is given. tests/cli/test_next_steps.py puts a
ticket in each situation and runs every command the table suggests for it.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickets.store import TicketStore

ANY = "*"  # the advice for a situation whatever command was tried

# A ticket's situation: its status, made finer where the next step differs (see situation()).
SITUATIONS = (
    "pending", "running", "stale", "interrupted", "failed-resumable", "failed-check", "failed-work", "failed",
    "failed-round",
    "complete",
    "complete-empty", "in-place", "conflict", "merged", "discarded", "reverted",
)

# (situation, command tried) -> what to do instead; (situation, ANY) when the command does not
# change the advice. {run}, {resume}, ... are replaced by the whole command (see command()).
TABLE: dict[tuple[str, str], str] = {
    ("pending", ANY): "start it with {run}",
    ("running", ANY): "wait for its run to end (watch it with {log})",
    ("stale", ANY): "the process that ran it is gone: continue it with {resume}",
    ("interrupted", ANY): "continue it with {resume}",
    ("failed-resumable", ANY): "retry it from where it failed with {resume}",
    ("failed-check", ANY): "its check still fails; its work is committed on its branch: ask for changes "
                           "with {feedback}, give it more rounds with {resume}, or drop it with {discard}",
    ("failed-work", ANY): "its work is committed on its branch: ask for changes with {feedback}, have the "
                          "middle agent try again from where it stopped with {resume}, or drop it with {discard}",
    ("failed", ANY): "its run ended for good: start a new one with {run}",
    ("failed-round", ANY): "its review round ended; its branch keeps the work: ask again with {feedback}, have "
                           "the middle agent try again from where it stopped with {resume}, or drop it with "
                           "{discard}",
    ("failed-round", "resume"): "ask again with {feedback}, or drop it with {discard}",
    ("complete", ANY): "review it with {diff}, then merge it ({merge}), ask for changes ({feedback}) "
                       "or discard it ({discard})",
    ("complete-empty", ANY): "it changed no files: mark it merged with {merge}",
    ("in-place", ANY): "its edits are in the project directory already (review them with `git diff` "
                       "there); run it again on purpose with {rerun}",
    ("conflict", ANY): "resolve the conflict on its branch (or ask for it with {feedback}), then {merge} "
                       "again, or drop it with {discard}",
    ("merged", ANY): "run it again on purpose with {rerun}, or undo it with {revert}",
    ("discarded", ANY): "start it again with {run}",
    ("reverted", ANY): "start it again with {run}",
    # where the command tried changes the advice
    ("complete", "run"): "merge it ({merge}) or discard it ({discard}) first",
    ("conflict", "run"): "resolve the conflict on its branch and {merge} again, or discard it ({discard}) first",
    ("merged", "discard"): "undo it with {revert}",
    ("running", "discard"): "stop it first (Ctrl-C where it runs), then discard it",
    ("running", "revert"): "wait for its run to end (watch it with {log}), then revert it",
    ("complete-empty", "run"): "mark it merged with {merge}, or run it again on purpose with {rerun}",
    ("failed", "revert"): "drop its work with {discard}, or start a new run with {run}",
    ("failed-resumable", "revert"): "retry it with {resume}, or drop its work with {discard}",
    ("failed-check", "merge"): "its check still fails; its work is committed on its branch: ask for changes "
                               "with {feedback}, give it more rounds with {resume}, or, if you judge the "
                               "failure is not the ticket's, merge it as it is with {override}",
    ("failed-check", "revert"): "ask for changes with {feedback}, give it more rounds with {resume}, or drop "
                                "its work with {discard}",
    ("failed-work", "revert"): "ask for changes with {feedback}, try again with {resume}, or drop its work "
                               "with {discard}",
    # `middle run` of a ticket whose earlier run left work: refused (orchestrator.workspace.leftover)
    ("failed-work", "run"): "continue its work with {resume} or {feedback}, or start over with {fresh} "
                            "(drops it)",
    ("failed-check", "run"): "continue its work with {resume} (more rounds) or {feedback}, or start over "
                             "with {fresh} (drops it)",
    ("failed-round", "run"): "continue its work with {feedback} or {resume}, or start over with {fresh} "
                             "(drops it)",
    ("failed-resumable", "run"): "continue its work with {resume} (or {feedback}: read at its next "
                                 "assessment), or start over with {fresh} (drops it)",
    ("interrupted", "revert"): "continue it with {resume}, or drop its work with {discard}",
}

_STARTED_AS: dict[str, Any] = {"config": None, "fake": False}


def started_as(**how: Any) -> None:
    """Record how this command was started (`config`: the --config given, `fake`: --fake), so
    advice repeats it. The CLI sets both when a command starts, then `fake` for run and resume."""
    unknown = set(how) - set(_STARTED_AS)
    if unknown:
        raise TypeError(f"started_as() takes config and fake, not {', '.join(sorted(unknown))}")
    _STARTED_AS.update(how)


def command(name: str, ticket_id: str, *, fake: bool = False) -> str:
    """The whole command, in backticks: `middle [--config FILE] <name> ID [--fake]`."""
    head = "middle"
    if _STARTED_AS["config"]:
        head += f" --config {shlex.quote(str(_STARTED_AS['config']))}"
    words = {"rerun": ["run", "--rerun", ticket_id], "fresh": ["run", ticket_id, "--fresh"],
             "log": ["log", ticket_id, "--follow"],
             "feedback": ["feedback", ticket_id, '"what to change"'],
             "override": ["merge", ticket_id, "--despite-check", '"your reason"']}.get(name, [name, ticket_id])
    if (fake or _STARTED_AS["fake"]) and words[0] in ("run", "resume", "feedback"):
        words.append("--fake")  # offline runs need no API key: neither does their next step
    return f"`{head} {' '.join(words)}`"


def advice(situation: str, ticket_id: str, tried: str = ANY, *, fake: bool = False) -> str:
    """What to do next, for a ticket in `situation` after the command `tried` was refused."""
    text = TABLE.get((situation, tried)) or TABLE[(situation, ANY)]
    names = ("run", "resume", "rerun", "fresh", "merge", "discard", "revert", "diff", "log", "feedback", "override")
    return text.format(**{n: command(n, ticket_id, fake=fake) for n in names})


def situation(store: TicketStore, ticket_id: str) -> str:
    """The ticket's situation (one of SITUATIONS), read from the store."""
    from tickets.claims import claim_is_live

    status = store.get_ticket(ticket_id).status.value
    run = store.latest_run(ticket_id)
    if status == "running":
        claim = store.get_claim(ticket_id)
        return "running" if claim is not None and claim_is_live(claim) else "stale"
    if status == "failed":
        end = store.run_end_data(run["id"]) if run else None
        if (end or {}).get("check_failed"):
            return "failed-check"
        if (end or {}).get("kept_work"):  # the agent gave up, or a limit: its work is on its branch
            return "failed-round" if run and store.round_of(run["id"]) > 1 else "failed-work"
        if (end or {}).get("resumable"):
            return "failed-resumable"
        # A review round that failed leaves the earlier rounds' work on the branch: another round
        # can go on from there (a new run would start the ticket over).
        return "failed-round" if run and store.round_of(run["id"]) > 1 else "failed"
    if status == "complete" and run and run.get("isolation") != "worktree":
        return "in-place"
    if status == "complete" and not (run and run.get("head_commit")):
        return "complete-empty"
    return status


def advise(store: TicketStore, ticket_id: str, tried: str = ANY) -> str:
    """What to do next with the stored ticket, after `tried` was refused (its run's --fake kept)."""
    run = store.latest_run(ticket_id)
    return advice(situation(store, ticket_id), ticket_id, tried, fake=bool(run and run.get("offline")))
