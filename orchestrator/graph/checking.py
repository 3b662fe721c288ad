"""The graph's check loop: done means the project's checks pass.

- `prepare` (after load_ticket, before any turn): a new worktree gets `[worktree] copy` and
  `[worktree] setup`; then each check command's result on the ticket's base commit is read from
  the store or run once here (in the fresh worktree, which is the base commit). A ticket with
  `check_must_pass: true` (a bug report whose repro fails now) skips that: its checks must pass
  outright, so nothing the base already fails is excused.
- `check` (when the middle agent says complete): the commands run in the worktree, in order; one
  that fails (worse than on the base) goes back to the middle agent (`correct`, then a turn), at
  most `[check] max_rounds` times; after that the ticket fails with its work committed on its
  branch, and `middle feedback` or `middle resume` continue it.

Every check run is a `check` run event; a run records its check outcome and its corrections.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from orchestrator.checks import setup as worktree_setup
from orchestrator.checks.runner import CheckResult, run_check
from orchestrator.checks.verdict import FAILED, NO_WORSE, PASSED, Verdict, judge
from orchestrator.errors import CheckCannotStart, CheckFailed, TicketError
from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import TicketState
from orchestrator.graph.takeover import local_ticket
from orchestrator.lifecycle.next_steps import command
from orchestrator.workspace.local_files import untracked

log = logging.getLogger("middle.graph.checks")

Update = dict[str, Any]
PREPARED = "middle-prepared"  # in a worktree's own git folder: its copy and setup are done


def commands_for(ctx: TicketContext, ticket: Any) -> list[str]:
    """The ticket's check commands: its front matter's `check:` (`[]`: none), else [check] commands."""
    own = (ticket.fields or {}).get("check") if hasattr(ticket, "fields") else None
    if isinstance(own, list):
        return [str(c) for c in own]
    return list(ctx.check.commands)


def must_pass(ticket: Any) -> bool:
    """Whether the ticket's checks must pass outright (`check_must_pass: true` in its front
    matter): a failure the base commit already had is not excused, as for a failing repro."""
    return (getattr(ticket, "fields", None) or {}).get("check_must_pass") is True


def _where(t: dict[str, Any]) -> Path:
    ws = t.get("workspace")
    return Path(ws["path"]) if ws else Path(t.get("cwd") or t["project_path"])


# -- prepare ------------------------------------------------------------------------------------

def prepare(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    t = local_ticket(ctx, state)
    ws = t.get("workspace")
    if ws and ctx.worktree_setup is not None:
        _set_up(ctx, state["run_id"], t, Path(ws["path"]))
    checks = t.get("check") or []
    if not checks:
        return {"ticket": t}
    if t.get("check_must_pass"):
        ctx.say("the ticket's checks must pass outright (check_must_pass): the base commit is not "
                "measured, and a failure it already had is not excused")
        return {"ticket": t, "check_base": {}}
    base_commit = (ws or {}).get("base_commit") or "in-place"
    base: dict[str, Any] = {}
    for cmd in checks:
        stored = ctx.store.check_baseline(base_commit, cmd) if ws else None
        if stored is None:
            if ws and Path(ws["path"]).is_dir() and _at(Path(ws["path"]), base_commit):
                result = _run(ctx, state, t, cmd, phase="base")
            elif not ws:  # in place: the project as it is now is the base
                result = _run(ctx, state, t, cmd, phase="base")
            else:  # a later round or a takeover: the base was not measured where it could be
                ctx.say(f"check `{cmd}` has no result on the base commit {base_commit[:10]}: every failure "
                        "counts as the ticket's")
                continue
            if ws:
                ctx.run.put_check_baseline(base_commit, cmd, result.to_dict())  # fenced; never a killed one
        else:
            result = CheckResult.from_dict(stored)
        base[cmd] = result.to_dict()
        if not result.passed:
            ctx.say(f"check `{cmd}` already fails on the base commit ({_failure_line(result)}): the ticket "
                    "must leave it no worse")
    return {"ticket": t, "check_base": base}


def _set_up(ctx: TicketContext, run_id: str, t: dict[str, Any], worktree: Path) -> None:
    """Copy and set up a worktree once (a round or a resume reuses what was done)."""
    from orchestrator.gitrun import out

    cfg = ctx.worktree_setup
    if not cfg.copy_paths and not cfg.setup:
        return
    marker = Path(out(worktree, "rev-parse", "--path-format=absolute", "--git-path", PREPARED))
    if marker.is_file():
        return
    done = worktree_setup.prepare(Path(t["project_path"]), worktree, copy=list(cfg.copy_paths), setup=list(cfg.setup),
                                  timeout_s=cfg.setup_timeout_s, run_id=run_id, say=ctx.say,
                                  on_result=lambda r: ctx.record("setup", _event(r)))
    failed = done.failed
    if failed is not None:
        raise TicketError(f"worktree setup `{failed.command}` failed ({_failure_line(failed)}), so no turn "
                          f"ran: fix [worktree] setup (its output is in `middle log {t['id']}`), then "
                          f"{command('resume', t['id'])}")
    marker.write_text("done\n", encoding="utf-8")


def _at(worktree: Path, commit: str) -> bool:
    """Whether the worktree is still exactly the commit it started from (no turn changed it)."""
    from orchestrator.gitrun import git

    head = git(worktree, "rev-parse", "HEAD").stdout.strip()
    clean = git(worktree, "status", "--porcelain", "--untracked-files=no").stdout.strip() == ""
    return head == commit and clean


# -- check --------------------------------------------------------------------------------------

def check(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    t = local_ticket(ctx, state)
    commands = t.get("check") or []
    if not commands:
        return {"check_passed": True}
    base = state.get("check_base") or {}
    corrections = state.get("corrections", 0)
    for cmd in commands:
        result = _run(ctx, state, t, cmd, phase="check", round_no=corrections + 1)
        verdict = judge(result, CheckResult.from_dict(base[cmd]) if cmd in base else None)
        _record_verdict(ctx, state, result, verdict, corrections + 1)
        if verdict.ok:
            if verdict.outcome == NO_WORSE:
                ctx.say(f"check `{cmd}` fails only as it did on the base commit"
                        + (f" ({len(verdict.already_failing)} test(s) failed there too)" if verdict.already_failing
                           else "") + ": no worse than the base")
            continue
        return _failed(ctx, state, t, result, verdict, corrections)
    ctx.run.set_fields(check_status=PASSED, corrections=corrections)
    ctx.say(f"the checks pass ({len(commands)} command(s))"
            + (f" after {corrections} correction(s)" if corrections else ""))
    return {"check_passed": True}


def _failed(ctx: TicketContext, state: TicketState, t: dict[str, Any], result: CheckResult, verdict: Verdict,
            corrections: int) -> Update:
    """A check that fails: back to the middle agent, or, past the budget, the ticket fails."""
    budget = ctx.run.record()["check_budget"] or ctx.check.max_rounds
    if corrections >= budget:
        ctx.run.set_fields(check_status=FAILED, corrections=corrections)
        _keep_work(ctx, state, t, result)
        raise CheckFailed(
            f"check `{result.command}` still failing after {corrections} round(s) ({_failure_line(result)}); "
            f"the work is committed on its branch: ask for changes with {command('feedback', t['id'])}, "
            f"or give it {ctx.check.max_rounds} more round(s) with {command('resume', t['id'])}")
    ctx.run.set_fields(check_status=FAILED, corrections=corrections + 1)
    ctx.say(f"check `{result.command}` failed ({_failure_line(result)}): back to the middle agent "
            f"(correction {corrections + 1} of at most {budget})")
    return {"check_passed": False, "corrections": corrections + 1,
            "check_failure": failure_text(result, verdict)}


def _keep_work(ctx: TicketContext, state: TicketState, t: dict[str, Any], result: CheckResult) -> None:
    """The ticket's work so far, committed on its branch (what feedback or a resume continues)."""
    ws = t.get("workspace")
    if not ws or ctx.worktrees is None:
        return
    from orchestrator.workspace import Workspace
    from orchestrator.workspace.git import commit_message

    summary = (state.get("decision") or {}).get("summary", "").strip()
    message = commit_message(t["title"], (summary + "\n\n" if summary else "")
                             + f"Work in progress: the check `{result.command}` still fails.")
    sha, changes = ctx.worktrees.commit(Workspace.from_dict(ws), message)
    ctx.run.set_fields(head_commit=sha, changes=changes)
    if sha and ctx.worktrees.shared:
        ctx.worktrees.push(Workspace.from_dict(ws))


def correct(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    """The middle agent reads the failed check and writes Claude Code's next prompt."""
    ctx = runtime.context
    prompt = ctx.agent.correct(state["ticket"], state.get("check_failure", ""), state.get("memories", ""))
    ctx.say("the middle agent wrote the next prompt from the failed check")
    return {"next_prompt": prompt}


def route_after_check(state: TicketState, runtime: Runtime[TicketContext]) -> str:
    return "commit" if state.get("check_passed") else "correct"


# -- the parts ------------------------------------------------------------------------------------

def _run(ctx: TicketContext, state: TicketState, t: dict[str, Any], cmd: str, *, phase: str,
         round_no: int = 0) -> CheckResult:
    """Run one check command in the ticket's worktree; what it leaves untracked is removed."""
    where = _where(t)
    before = untracked(where) if t.get("workspace") else set()
    ctx.say(f"{'base check' if phase == 'base' else 'check'}: {cmd}")
    result = run_check(cmd, where, timeout_s=ctx.check.timeout_s, run_id=state["run_id"])
    if t.get("workspace"):
        worktree_setup.remove_new_untracked(where, before)
    if result.cannot_start:
        ctx.record("check", {**_event(result), "phase": phase, "round": round_no, "outcome": "cannot-start"})
        raise CheckCannotStart(f"check `{cmd}` could not start (exit {result.exit_code}: "
                          f"{_last_line(result.tail) or 'command not found'}): fix [check] commands (or the "
                          f"ticket's `check:`), then {command('resume', t['id'])}")
    if phase == "base":
        ctx.record("check", {**_event(result), "phase": "base"})
    return result


def _record_verdict(ctx: TicketContext, state: TicketState, result: CheckResult, verdict: Verdict,
                    round_no: int) -> None:
    ctx.record("check", {**_event(result), "phase": "check", "round": round_no, "turn": state.get("turn", 0),
                         "outcome": verdict.outcome, "already_failing": verdict.already_failing,
                         "new_failures": verdict.new_failures})


def _event(result: CheckResult) -> dict[str, Any]:
    return {"command": result.command, "exit_code": result.exit_code, "duration_s": result.duration_s,
            "tail": result.tail, "timed_out": result.timed_out, "failing": result.failing}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _failure_line(result: CheckResult) -> str:
    if result.timed_out:
        return f"timed out after {result.duration_s:.0f}s"
    what = f"exit {result.exit_code}"
    if result.failing:
        what += f", {len(result.failing)} failing test(s)"
    return what


def failure_text(result: CheckResult, verdict: Verdict) -> str:
    """What the middle agent reads of a failed check: the command, how it ended, which tests
    fail anew (and which failed on the base already), and the tail of its output."""
    lines = [f"Command: {result.command}",
             "It did not finish in time and was stopped." if result.timed_out else f"Exit code: {result.exit_code}"]
    if verdict.new_failures:
        lines.append("Failing tests: " + ", ".join(verdict.new_failures[:30]))
    if verdict.already_failing:
        lines.append("Already failing before this ticket (not yours to fix): "
                     + ", ".join(verdict.already_failing[:30]))
    lines += ["The end of its output:", result.tail.strip() or "(no output)"]
    return "\n".join(lines)


__all__ = ["FAILED", "NO_WORSE", "PASSED", "check", "commands_for", "correct", "failure_text", "must_pass",
           "prepare", "route_after_check"]
