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
from orchestrator.checks import spec
from orchestrator.checks.runner import DIAGNOSTICS, JUNIT, CheckResult, run_check
from orchestrator.checks.verdict import FAILED, NO_WORSE, PASSED, SHOWN_NAMES, UNDECIDED, Verdict, already_note, judge
from orchestrator.config.settings import CheckCommand as CheckConfigCommand
from orchestrator.errors import CheckCannotStart, CheckFailed, TicketError
from orchestrator.graph.context import TicketContext
from orchestrator.graph.limits import spend_limit_reason
from orchestrator.graph.state import TicketState
from orchestrator.graph.takeover import local_ticket
from orchestrator.lifecycle.next_steps import command
from orchestrator.workspace.local_files import untracked

log = logging.getLogger("middle.graph.checks")

Update = dict[str, Any]
PREPARED = "middle-prepared"  # in a worktree's own git folder: its copy and setup are done
# How a kept base result was read: 2 = failures per JUnit test or diagnostic (1: pytest's summary
# lines and the exit code); 3 = cargo test and go test read test by test too (a base kept by 2
# names none of their failures); 4 = `node --test`, jest, vitest and mocha too (3 read them by
# their exit code); 5 = rspec, and `pnpm test` / `yarn test` through their script's runner, too (4
# read them by their exit code); 6 = a line that names no runner (`make test`, tox, a script) read
# from the reports of the runners behind it (5 read it by diagnostics lines or its exit code); 7 =
# a `python -m unittest` behind a wrapper (`make test`, tox), and mocha after a coverage tool's own
# `--reporter` (`c8 --reporter=text mocha`), read from their reports too (6 read them by their exit
# code), a test file in a site-packages named from there (6 kept the env's path), and a run whose
# report names a failing test not passed whatever its exit code (6: `pytest || true` passed), and
# same-named cargo doc-tests numbered by their lines (6: by the output's order), and a failed run's
# coded lint problems beside its tests (`pytest; ruff check .`) among its failures; 8: also those
# at a line and column that carry no code (go vet, gcc) and eslint's stylish lines (7 left them
# out: a base of 7 compared with a ticket's run of 8 would read them as new), and go test's own
# failure lines behind a wrapper and jest's report there (7 judged `make test` running go test or
# jest, and an `npm test` whose script runs jest among other things, by its exit code), and
# same-named rspec examples and jest tests numbered by where they are defined (7: by the run's
# order, which --order random and --randomize change); 9: a failing run read by its exit code keeps
# its normalised output (output_lines, which 8 did not keep: compared, it would read as unknown),
# and `make test` running cargo test or go test is read test by test. A result of another format is measured
# again, not compared.
BASELINE_FORMAT = 9
EVENT_NAMES = 200


def commands_for(ctx: TicketContext, ticket: Any) -> list[spec.Item]:
    """The ticket's check commands, as state items: its front matter's `check:` (`[]`: none; shell
    lines or tables), else [check] commands. A bad `check:` fails this ticket alone."""
    own = (ticket.fields or {}).get("check") if hasattr(ticket, "fields") else None
    try:
        if isinstance(own, list):
            return spec.items(own, f"the `check:` of ticket {ticket.id!r}")
        if own is not None:
            raise ValueError(f"the `check:` of ticket {ticket.id!r} must be a list of shell lines or tables, "
                             f"not {type(own).__name__}")
        return spec.items(list(ctx.check.commands), "[check] commands")
    except ValueError as exc:
        raise TicketError(f"{exc}: fix it (see docs/checks.md), then {command('run', ticket.id)}") from None


def allows_removed_tests(ticket: Any) -> bool:
    """Whether the ticket may remove or skip tests the base ran (`allow_removed_tests: true`)."""
    return (getattr(ticket, "fields", None) or {}).get("allow_removed_tests") is True


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
    for item in checks:
        k, options = spec.key(item), spec.spec_of(item)
        stored = ctx.store.check_baseline(base_commit, k) if ws else None
        if stored is not None and stored.get("format") != BASELINE_FORMAT:
            stored = None  # kept by an older middle, which read failures another way: measured again
        if stored is None:
            if ws and Path(ws["path"]).is_dir() and _at(Path(ws["path"]), base_commit):
                result = _run(ctx, state, t, item, phase="base")
            elif not ws:  # in place: the project as it is now is the base
                result = _run(ctx, state, t, item, phase="base")
            else:  # a later round or a takeover: the base was not measured where it could be
                ctx.say(f"check `{options.run}` has no result on the base commit {base_commit[:10]}: every "
                        "failure counts as the ticket's")
                continue
            if result.problem is not None:
                # The ticket goes back to pending (running/policy.py): it is run again, not resumed.
                raise CheckCannotStart(
                    f"check `{options.run}` cannot run on the base commit ({result.problem}), so no turn ran "
                    f"and ticket {t['id']} is still pending: fix {_check_source(ctx, t['id'])} (or "
                    f"[worktree] setup, if it installs the command), then {command('run', t['id'])}; "
                    f"its output is in `middle log {t['id']}`")
            if ws and keepable(result):  # fenced by the run's token; the store never keeps a killed one
                ctx.run.put_check_baseline(base_commit, k, {**result.to_dict(), "format": BASELINE_FORMAT})
        else:
            result = CheckResult.from_dict(stored)
        base[k] = result.to_dict()
        if not result.passed:
            ctx.say(base_line(result, options))
    return {"ticket": t, "check_base": base}


def _check_source(ctx: TicketContext, ticket_id: str) -> str:
    """Where the ticket's check commands are set: its own `check:` (in its file), else [check] commands."""
    ticket = ctx.store.get_ticket(ticket_id)
    if isinstance((ticket.fields or {}).get("check"), list):
        return f"the `check:` of ticket {ticket_id}" + (f" in {ticket.source}" if ticket.source else "")
    return "[check] commands in the config"


def keepable(result: CheckResult) -> bool:
    """Whether a base result may be kept for other tickets: it ran to its end (not stopped, killed
    or timed out) and could run at all."""
    return (not result.timed_out and result.problem is None and result.exit_code is not None
            and result.exit_code >= 0)


def base_line(result: CheckResult, options: CheckConfigCommand) -> str:
    """What is said of a check that already fails on the base commit: its failures, named."""
    cmd = options.run
    if result.kind == JUNIT:
        return (f"check `{cmd}` already fails on the base commit ({already_note(sorted(set(result.failing or [])))}): "
                f"the ticket must leave it no worse ({result.tests_run} test(s) ran)")
    if result.kind == DIAGNOSTICS:
        return (f"check `{cmd}` already fails on the base commit ({len(result.failing or [])} problem(s): "
                + ", ".join((result.failing or [])[:SHOWN_NAMES])
                + (" ..." if len(result.failing or []) > SHOWN_NAMES else "") + "): the ticket must not add any")
    if options.baseline == "exit-code":
        return (f"check `{cmd}` already fails on the base commit (exit {result.exit_code}); baseline = "
                "\"exit-code\": failing with the same exit code counts as no worse")
    return (f"check `{cmd}` already fails on the base commit (exit {result.exit_code}) and names no failures "
            "that can be compared (no JUnit report, no diagnostics): a ticket that leaves it failing the same way "
            "cannot be judged and stops for you to decide, one that makes it fail differently must make it pass "
            "(or set baseline = \"exit-code\" on it in [[check.commands]]; a ticket meant to make it pass says "
            "`check_must_pass: true`)")


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
    from orchestrator.workspace.local_files import local_paths

    head = git(worktree, "rev-parse", "HEAD").stdout.strip()
    # a tracked file `[worktree] copy` gave local content is the worktree's own, not a change
    local = {p.rstrip("/") for p in local_paths(worktree)}
    changed = [line[3:] for line in git(worktree, "status", "--porcelain", "--untracked-files=no").stdout.splitlines()
               if line.strip()]
    return head == commit and all(p in local for p in changed)


# -- check --------------------------------------------------------------------------------------

def check(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    t = local_ticket(ctx, state)
    commands = t.get("check") or []
    if not commands:
        return {"check_passed": True, "check_stopped": False}
    base = state.get("check_base") or {}
    corrections = state.get("corrections", 0)
    verdicts: list[tuple[CheckResult, Verdict]] = []
    for item in commands:
        k, options = spec.key(item), spec.spec_of(item)
        result = _run(ctx, state, t, item, phase="check", round_no=corrections + 1)
        base_result = CheckResult.from_dict(base[k]) if k in base else None
        if result.problem is not None and base_result is None and _cannot_start(result):
            ctx.record("check", {**_event(result), "phase": "check", "round": corrections + 1,
                                 "outcome": "cannot-start"})
            raise CheckCannotStart(f"check `{options.run}` could not start ({result.problem}): fix [check] "
                                   f"commands (or the ticket's `check:`), then {command('resume', t['id'])}")
        # what the ticket changed matters only to a pass on a base that failed (verdict.judge): the
        # git diffs are not run for every check of every round
        changed = _changed(t) if result.passed and base_result is not None and not base_result.passed else None
        verdict = judge(result, base_result, options, allow_removed_tests=bool(t.get("allow_removed_tests")),
                        changed=changed[0] if changed else None, added=changed[1] if changed else None,
                        diff=changed[2] if changed else "", bases=changed[3] if changed else None)
        _record_verdict(ctx, state, result, verdict, corrections + 1, base_result)
        if verdict.outcome == UNDECIDED:
            _undecided(ctx, state, t, result, verdict, corrections)
        if verdict.ok:
            if verdict.outcome == NO_WORSE:
                ctx.say(f"check `{options.run}` fails only as it did on the base commit "
                        f"({verdict.note(base_result.exit_code if base_result else None)}): no worse than the base")
            verdicts.append((result, verdict))
            continue
        return _failed(ctx, state, t, result, verdict, corrections)
    worse = [(r, v) for r, v in verdicts if v.outcome == NO_WORSE]
    note = (worse[0][1].note() if len(commands) == 1 else "; ".join(f"`{r.command}`: {v.note()}" for r, v in worse)
            ) if worse else None
    status = NO_WORSE if worse else PASSED
    ctx.run.set_fields(check_status=status, check_note=note, corrections=corrections)
    ctx.say(f"the checks pass ({len(commands)} command(s))" if not worse else
            f"the checks are no worse than on the base ({len(commands)} command(s); {note})"
            + (f" after {corrections} correction(s)" if corrections else ""))
    return {"check_passed": True, "check_stopped": False}


def _changed(t: dict[str, Any]) -> tuple[list[str], list[str], str, dict[str, str]] | None:
    """The paths the ticket changed since its base commit (committed or not, new files too), those
    of them that are new, the diff of its changed source files and their text on the base commit
    (where a test inside a source file shows: touched_tests.in_source), or None when that is not
    known (run in place: there is no base commit to compare with)."""
    from orchestrator.checks.touched_tests import may_hold_tests
    from orchestrator.gitrun import GitError, blobs, git

    ws = t.get("workspace")
    if not ws or not ws.get("base_commit") or not Path(ws["path"]).is_dir():
        return None
    where, base = Path(ws["path"]), ws["base_commit"]
    # paths as they are (git quotes non-ASCII ones by default)
    diff = git(where, "-c", "core.quotePath=false", "diff", "--name-status", "--no-renames", base, check=False)
    new = git(where, "-c", "core.quotePath=false", "ls-files", "--others", "--exclude-standard", check=False)
    if diff.returncode != 0 or new.returncode != 0:
        return None
    rows = [ln.split("\t", 1) for ln in diff.stdout.splitlines() if "\t" in ln]
    untracked = {ln for ln in new.stdout.splitlines() if ln.strip()}
    added = {path for status, path in rows if status == "A"} | untracked
    # tracked ones only: a file new and untracked has no base side, so removes no test
    sources = may_hold_tests(path for _status, path in rows)
    # -U0: each hunk only the lines it removes and adds, numbered in the base file's text
    patch = git(where, "-c", "core.quotePath=false", "diff", "-U0", "--no-renames", "--no-ext-diff", "--no-color",
                base, "--", *sources, check=False,
                env={"GIT_LITERAL_PATHSPECS": "1"}) if sources else None  # a name with `*` or `:` is a name
    if patch is not None and patch.returncode != 0:
        return None
    # their base text, all in one git (a ticket touching 200 source files starts one, not 200)
    paths = [p for status, p in rows if status != "A" and p in sources]
    try:
        shown = blobs(where, [f"{base}:{path}" for path in paths]) if paths else []
    except GitError:
        return None
    if any(text is None for text in shown):
        return None
    texts = {path: text for path, text in zip(paths, shown) if text is not None}
    return (sorted({path for _status, path in rows} | untracked), sorted(added), patch.stdout if patch else "",
            texts)


def _undecided(ctx: TicketContext, state: TicketState, t: dict[str, Any], result: CheckResult, verdict: Verdict,
               corrections: int) -> None:
    """A check whose outcome middle cannot tell (verdict.UNDECIDED): the ticket does not complete,
    and no correction is asked (the middle agent could not tell either); it stops with its work
    committed on its branch, saying why, and a person decides."""
    ctx.run.set_fields(check_status=FAILED, check_note=None, corrections=corrections)
    keep_work_of(ctx, state, t, f"the check `{result.command}` cannot be judged.")
    raise CheckFailed(
        f"check `{result.command}` cannot be judged: {verdict.reason} (a ticket meant to make it pass says "
        f"`check_must_pass: true` in its front matter); the work is committed on its branch: "
        f"read it ({command('diff', t['id'])}), then, if it is right, merge it as it is with "
        f"{command('override', t['id'])}, "
        f"or ask for changes with {command('feedback', t['id'])}; if the check is what is wrong, fix "
        f"{_check_source(ctx, t['id'])} (or the ticket's front matter), then run it again with "
        f"{command('resume', t['id'])}")


def _cannot_start(result: CheckResult) -> bool:
    """The command itself is wrong (not found, its runner not installed), not what a ticket did."""
    return result.cannot_start or (result.problem or "").startswith(("No module named", "can't open file"))


def _failed(ctx: TicketContext, state: TicketState, t: dict[str, Any], result: CheckResult, verdict: Verdict,
            corrections: int) -> Update:
    """A check that fails: back to the middle agent, or, past the budget, the ticket fails."""
    budget = ctx.run.record()["check_budget"] or ctx.check.max_rounds
    if corrections >= budget:
        ctx.run.set_fields(check_status=FAILED, check_note=None, corrections=corrections)
        _keep_work(ctx, state, t, result)
        more = ctx.check.max_rounds
        again = (f"give it {more} more round(s) with {command('resume', t['id'])}" if more else
                 f"run the check again with {command('resume', t['id'])} (with [check] max_rounds = 0 the "
                 "middle agent corrects nothing: raise it to let it)")
        raise CheckFailed(
            f"check `{result.command}` still failing after {corrections} round(s) ({_failure_line(result, verdict)}); "
            f"the work is committed on its branch: ask for changes with {command('feedback', t['id'])}, "
            f"or {again}; if you judge the failure is not the ticket's, merge it as it is with "
            f"{command('override', t['id'])}")
    line = f"`{result.command}` failed: {_failure_line(result, verdict)}"
    spent = spend_limit_reason(state, ctx)
    if spent:  # a correction is another turn: past [agent] max_cost_usd or max_turns, none starts
        ctx.run.set_fields(check_status=FAILED, check_note=None, corrections=corrections)
        ctx.say(f"check {line}: no correction starts ({spent.split(' (', 1)[0]})")
        return {"check_passed": False, "check_stopped": True, "check_failed_line": line}
    ctx.run.set_fields(check_status=FAILED, check_note=None, corrections=corrections + 1)
    ctx.say(f"check `{result.command}` failed ({_failure_line(result, verdict)}): back to the middle agent "
            f"(correction {corrections + 1} of at most {budget})")
    return {"check_passed": False, "check_stopped": False, "corrections": corrections + 1,
            "check_failure": failure_text(result, verdict),
            "check_failed_line": line}


def _keep_work(ctx: TicketContext, state: TicketState, t: dict[str, Any], result: CheckResult) -> None:
    """The ticket's work so far, committed on its branch (what feedback or a resume continues)."""
    keep_work_of(ctx, state, t, f"the check `{result.command}` still fails.")


def keep_work_of(ctx: TicketContext, state: TicketState, t: dict[str, Any], why: str) -> None:
    from orchestrator.graph.keep_work import keep_work

    keep_work(ctx, state, t, why)


def correct(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    """The middle agent reads the failed check and writes Claude Code's next prompt."""
    ctx = runtime.context
    prompt = ctx.agent.correct(state["ticket"], state.get("check_failure", ""), state.get("memories", ""))
    ctx.say("the middle agent wrote the next prompt from the failed check")
    return {"next_prompt": prompt}


def route_after_check(state: TicketState, runtime: Runtime[TicketContext]) -> str:
    if state.get("check_passed"):
        return "commit"
    return "fail" if state.get("check_stopped") else "correct"


# -- the parts ------------------------------------------------------------------------------------

def _run(ctx: TicketContext, state: TicketState, t: dict[str, Any], item: spec.Item, *, phase: str,
         round_no: int = 0) -> CheckResult:
    """Run one check command in the ticket's worktree; what it leaves untracked is removed."""
    where = _where(t)
    before = untracked(where) if t.get("workspace") else set()
    ctx.say(f"{'base check' if phase == 'base' else 'check'}: {spec.run_line(item)}")
    result = run_check(item, where, timeout_s=ctx.check.timeout_s, run_id=state["run_id"])
    if t.get("workspace"):
        worktree_setup.remove_new_untracked(where, before)
    if phase == "base":
        ctx.record("check", {**_event(result), "phase": "base",
                             **({"outcome": "cannot-run"} if result.problem is not None else {})})
    return result


def _record_verdict(ctx: TicketContext, state: TicketState, result: CheckResult, verdict: Verdict,
                    round_no: int, base: CheckResult | None) -> None:
    ctx.record("check", {**_event(result), "phase": "check", "round": round_no, "turn": state.get("turn", 0),
                         "outcome": verdict.outcome, "label": verdict.label(base.exit_code if base else None),
                         "already_failing": verdict.already_failing, "new_failures": verdict.new_failures,
                         "removed_tests": verdict.removed_tests, "reason": verdict.reason,
                         "base_tests_run": base.tests_run if base else None})


def _event(result: CheckResult) -> dict[str, Any]:
    return {"command": result.command, "exit_code": result.exit_code, "duration_s": result.duration_s,
            "tail": result.tail, "timed_out": result.timed_out,
            # an event names at most EVENT_NAMES failures (a linter may report thousands on the base;
            # the kept base result has them all)
            "failing": result.failing[:EVENT_NAMES] if result.failing else result.failing, "kind": result.kind,
            "tests_run": result.tests_run, "problem": result.problem}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _failure_line(result: CheckResult, verdict: Verdict | None = None) -> str:
    if result.timed_out:
        return f"timed out after {result.duration_s:.0f}s"
    if result.problem is not None:
        return f"could not run: {result.problem}"
    what = f"exit {result.exit_code}"
    if verdict is not None and verdict.new_failures:
        what += f", {len(verdict.new_failures)} new failure(s)"
    elif result.failing:
        what += f", {len(result.failing)} failure(s)"
    if verdict is not None and verdict.removed_tests:
        what += f", {len(verdict.removed_tests)} test(s) of the base not run"
    return what


def failure_text(result: CheckResult, verdict: Verdict) -> str:
    """What the middle agent reads of a failed check: the command, how it ended, which failures
    are new (and which the base had already), the tests the ticket removed, and the tail of its
    output."""
    lines = [f"Command: {result.command}",
             "It did not finish in time and was stopped." if result.timed_out else f"Exit code: {result.exit_code}"]
    if result.problem is not None:
        lines.append(f"It could not run: {result.problem}")
    if verdict.new_failures:
        lines.append(("New problems: " if result.kind == DIAGNOSTICS else "Failing tests: ")
                     + ", ".join(verdict.new_failures[:30]))
    if verdict.removed_tests:
        lines.append("Tests the base commit ran that did not run now (removed, skipped or marked xfail; a "
                     "test must be fixed, not deleted, unless the ticket says so): "
                     + ", ".join(verdict.removed_tests[:30]))
    if verdict.already_failing:
        lines.append("Already failing before this ticket (not yours to fix): "
                     + ", ".join(verdict.already_failing[:30]))
    if verdict.reason and not verdict.new_failures and not verdict.removed_tests:
        lines.append(f"Why this is a failure: {verdict.reason}")
    if result.tests_run is not None:
        lines.append(f"Tests run: {result.tests_run}")
    lines += ["The end of its output:", result.tail.strip() or "(no output)"]
    return "\n".join(lines)


__all__ = ["FAILED", "NO_WORSE", "PASSED", "allows_removed_tests", "check", "commands_for", "correct",
           "failure_text", "must_pass", "prepare", "route_after_check"]
