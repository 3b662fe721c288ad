"""The graph's nodes: each reads state, uses the runtime context, and returns a state update."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from orchestrator.agent import prompts
from orchestrator.coding_agent import api_errors
from orchestrator.coding_agent.base import title_of
from orchestrator.errors import CodingAgentError, GitError, ModelAccessError, RunInterrupted, TicketError
from orchestrator.graph import checking
from orchestrator.graph import rounds as review
from orchestrator.graph.context import TicketContext
from orchestrator.graph.limits import spend_limit_reason
from orchestrator.graph.state import TicketState
from orchestrator.graph.takeover import local_ticket, recap
from orchestrator.graph.worktree import (
    drop_work_in_progress,
    fenced_push,
    refuse_lost_work,
    run_workspace,
    save_work_in_progress,
    saved_turn,
)
from orchestrator.killpoints import point
from orchestrator.lifecycle.next_steps import advice
from orchestrator.memory.format import Block, completion_doc
from orchestrator.names import INDEX_FAILED_NOTE, INDEXED_NOTE, RECALL_EVENT
from orchestrator.plugins.manager import call_hook
from orchestrator.workspace import Workspace, wip
from orchestrator.workspace.git import commit_message
from tickets.model import TurnRecord

log = logging.getLogger("middle.graph")

Update = dict[str, Any]


def _recall(ctx: TicketContext, state: TicketState, query: str, where: str) -> str:
    """The "Memories invoked" block: the project's recent work and one retrieve of related work;
    memory off means no call at all; any failure means no memories (of that part).

    A backend with standing project knowledge (`agent_context`, e.g. Hindsight's mental models)
    has it placed ahead of the "Memories invoked:" block.
    """
    if ctx.memory is None:
        return ""
    project_id = state["ticket"]["project_id"]
    window = _recent_work(ctx, project_id, where)  # the newest related_window tickets (or more)
    recent = window[:ctx.memory.recent_tickets]
    try:
        # Asks for as many more as it leaves out: "Related" leaves out the newest tickets. A long
        # ticket's start query is cut to [memory] max_query_chars (a client's would be refused).
        results = ctx.memory.retrieve(project_id, [ctx.memory.cut_query(query)],
                                      ctx.num_to_retrieve + len(window))
    except Exception as exc:  # memory failures never stop a ticket
        log.warning("memory recall at %s failed; going on with no memories: %s", where, exc)
        ctx.say(f"memory recall failed ({exc}); going on without memories")
        results = []
    # Within [memory] memories_budget_chars; related docs shown as recent work are left out;
    # the project's pinned docs are always in it; each memory shows its id.
    block = ctx.memory.block(project_id, recent, results, limit=ctx.num_to_retrieve,
                             leave_out=[doc for doc, _ in window])
    memories = block.text
    _record_recall(ctx, state, query, where, block, results)
    if memories:
        ctx.say(f"recalled {len(recent)} recent and up to {ctx.num_to_retrieve} related memory "
                f"doc(s) at {where}")
    try:
        standing = ctx.memory.agent_context(project_id)
    except Exception as exc:
        log.warning("memory agent context at %s failed; going on without it: %s", where, exc)
        standing = ""
    return "\n\n".join(part for part in (standing.strip(), memories) if part)


def _record_recall(ctx: TicketContext, state: TicketState, query: str, where: str, block: Block,
                   results: list[Any]) -> None:
    """A `recall` run event: each memory the block shows, with why it is there (memory.explain),
    for `middle log` and the usage counts of `middle bench runs` and the board."""
    assert ctx.memory is not None
    project_id = state["ticket"]["project_id"]
    try:
        explained: dict[str, dict[str, Any]] = {}
        for result in results:
            # the ids as the block shows them (it looked them up): no lookup of its own
            for doc, signals in zip(result["docs"], ctx.memory.explain(project_id, query, result, block.idents)):
                explained.setdefault(doc, signals)
        items = [{"id": block.ident(doc), "kind": "recent",
                  "why": "recent work: one of the project's newest tickets"} for doc in block.recent]
        for doc in block.related:
            why = explained[doc]["why"] if doc in explained else "pinned: always shown"
            items.append({"id": block.ident(doc), "kind": "related", "why": why})
        if items:
            ctx.run.event(RECALL_EVENT, {"where": where, "backend": ctx.memory.backend_name, "memories": items})
    except Exception as exc:  # the record of a recall never stops a ticket
        log.warning("could not record why memories were recalled at %s: %s", where, exc)


def _recent_work(ctx: TicketContext, project_id: str, where: str) -> list[tuple[str, str]]:
    """The project's newest ticket docs from the ticket store, (doc, date) newest first: as
    many as "Recent work" shows or "Related work" leaves out, whichever is more (none without
    a recent part: the flat block leaves nothing out)."""
    assert ctx.memory is not None
    mem = ctx.memory
    try:
        return ctx.store.recent_memory_docs(
            project_id, max(mem.recent_tickets, mem.related_window) if mem.recent_tickets else 0)
    except Exception as exc:  # a view for the agent; never a reason to stop
        log.warning("recent work at %s unavailable; going on without it: %s", where, exc)
        return []


def load_ticket(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    ticket = ctx.store.get_ticket(state["ticket_id"])
    if ctx.project_override:
        ticket = ticket.replace(project_path=ctx.project_override)
    path = Path(ticket.project_path)
    if not path.is_dir():
        where = f"`path:` in {ticket.source}" if ticket.source else "the ticket's project path"
        raise TicketError(
            f"ticket {ticket.id!r}: project path {path} does not exist; fix {where} and run it again"
        )
    workspace = run_workspace(ctx, ticket, state["run_id"])
    ctx.store.set_status(ticket.id, "running")
    call_hook(ctx.hooks, "on_ticket_start", ticket=ticket, run_id=state["run_id"])
    snapshot = {
        "id": ticket.id,
        "project_id": ticket.project_id,
        "title": ticket.title,
        "description": ticket.description,
        "project_path": str(path),
        # Where Claude Code works: the ticket's worktree, or the project itself (isolation none).
        "cwd": workspace["cwd"] if workspace else str(path),
        "workspace": workspace,
        "check": checking.commands_for(ctx, ticket),  # what "complete" must pass
        "check_must_pass": checking.must_pass(ticket),  # ...with no failure excused by the base
        "allow_removed_tests": checking.allows_removed_tests(ticket),  # may remove tests the base ran
    }
    return {"ticket": snapshot, "turn": 0, "transcript": [], "cost_usd": 0.0, "session_id": "",
            "status": "running", "memories": "", "indexed_docs": [],
            **review.round_state(ctx, state["run_id"])}  # a review round: its session, history, feedback


def recall_start(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx, t = runtime.context, state["ticket"]
    if ctx.memory is not None:
        _index_pending(ctx, t["project_id"])
    return {"memories": _recall(ctx, state, f"{t['title']}. {t['description'] or ''}", "ticket start")}


def _index_pending(ctx: TicketContext, project_id: str) -> None:
    """Earlier tickets' completion docs memory could not take then: indexed now, before recall."""
    from orchestrator.memory.pending import index_pending

    try:
        done = index_pending(ctx.store, ctx.memory, project_id)
    except Exception as exc:  # a view for the agent; never a reason to stop
        log.warning("indexing pending memory docs failed: %s", exc)
        return
    if done.indexed:
        ctx.say(f"indexed {done.indexed} earlier completion doc(s) that memory could not take when their "
                "ticket completed")


def plan(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    prompt = review.revise_prompt(ctx, state) or ctx.agent.plan(state["ticket"], state.get("memories", ""))
    ctx.run.set_fields(plan_memories=state.get("memories", ""), plan_prompt=prompt)
    ctx.say(f"planned the first prompt for {title_of(ctx.coding_agent)}")
    return {"next_prompt": prompt, "last_prompt": prompt}


def work(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    run_id, ticket = state["run_id"], local_ticket(ctx, state)
    # Moved to this runner's clone (a takeover): the session lives with the old directory.
    moved = ticket.get("cwd") != state["ticket"].get("cwd")
    turn_no = state.get("turn", 0) + 1
    prompt = state["next_prompt"]
    done = ctx.run.turn(turn_no)
    # (a turn not done: still "running", or "interrupted" by the run's end after an outage)
    kept = saved_turn(ctx, ticket, turn_no) if done and done["status"] != "done" else None
    saved: str | None = None
    if done and done["status"] == "done":
        # The turn finished but the process died before the checkpoint: never run it twice.
        text, session_id = done["response"], done["session_id"]
    elif kept is not None:
        # The turn finished and its work was saved (with its result), but the runner died or the
        # store was out of reach before its end was stored: stored now, never run twice.
        ctx.run.finish_turn(turn_no, response=kept.response, is_error=False, error=None, cost_usd=kept.cost_usd,
                            duration_ms=kept.duration_ms, usage=kept.usage, num_turns=kept.num_turns)
        text, session_id = kept.response, kept.session_id or (done["session_id"] if done else "")
        ctx.say(f"turn {turn_no} had finished and its work was saved before the run stopped: not run again")
    else:
        text, session_id, saved = _run_turn(ctx, state, ticket, turn_no, prompt, moved)
    _observe(ctx, state, ticket, turn_no, prompt, text or "")
    _turn_end_hook(ctx, run_id, ticket, turn_no)
    transcript = list(state.get("transcript", [])) + [{"turn": turn_no, "prompt": prompt, "response": text}]
    update: Update = {"turn": turn_no, "last_prompt": prompt, "last_response": text, "session_id": session_id,
                      "transcript": transcript, "cost_usd": ctx.run.total_cost(), "ticket": ticket}
    if saved is None:  # a turn finished by an earlier runner: its work as this worktree holds it now
        saved = save_work_in_progress(ctx, ticket, turn_no)
    return {**update, "wip": saved} if saved else update


def _run_turn(ctx: TicketContext, state: TicketState, ticket: dict[str, Any], turn_no: int, prompt: str,
              moved: bool) -> tuple[str, str, str | None]:
    """One Claude Code turn: stored as started before it launches; after it, its work and
    result saved (work in progress, pushed) before its end is stored, so no stored "done"
    describes work a takeover cannot reach. (text, session id, work-in-progress commit)."""
    if ctx.stop is not None and ctx.stop.is_set():
        raise RunInterrupted("stopped before Claude Code's next turn")
    # Turn 1 (or a retry of it) starts a new session; later turns resume the ticket's one,
    # unless the run moved here: a new session is then told what the earlier turns did.
    resume = review.resumes_session(state, turn_no) and not moved
    kind = getattr(ctx.coding_agent, "kind", None)
    # A session belongs to the agent that made it: when the ticket now names another coding agent
    # (its `coding_agent:` edited before a resume or a feedback round), that CLI cannot resume it.
    was = review.session_kind(ctx, ticket["id"], state.get("session_id")) if resume else None
    switched = was is not None and kind is not None and was != kind
    if switched:
        resume = False
        ctx.say(f"the ticket's session ran on {was}, and this turn runs on {kind}: a new session is told "
                "the earlier work")
    session_id = state["session_id"] if resume else str(uuid.uuid4())
    sent = recap(state.get("transcript", []), prompt) if moved and turn_no > 1 else prompt
    if switched:
        sent = review.recap(state, prompt)
    ctx.run.start_turn(turn_no, sent, session_id, resume, coding_agent=kind)  # stored before launch
    name = title_of(ctx.coding_agent, kind)
    ctx.say(f"turn {turn_no}: {name} is working")
    result = ctx.coding_agent.run_turn(
        sent, Path(ticket.get("cwd") or ticket["project_path"]), session_id=session_id,
        resume=resume, on_event=ctx.on_event,
    )
    if resume and review.session_lost(result):  # e.g. a round run with another CLAUDE_CONFIG_DIR
        session_id, sent, resume = str(uuid.uuid4()), review.recap(state, prompt), False
        ctx.say(f"{name}'s session of this ticket is not here: a new one is told the earlier work")
        ctx.run.start_turn(turn_no, sent, session_id, resume, coding_agent=kind)
        result = ctx.coding_agent.run_turn(sent, Path(ticket.get("cwd") or ticket["project_path"]),
                                           session_id=session_id, resume=False, on_event=ctx.on_event)
    ctx.run.guard()  # taken over while Claude Code ran (its process was killed): nothing is stored
    saved = None
    if not result.is_error:
        saved = save_work_in_progress(ctx, ticket, turn_no, wip.TurnResult(
            response=result.text, session_id=result.session_id or session_id, cost_usd=float(result.cost_usd),
            duration_ms=int(result.duration_ms), usage=dict(result.usage), num_turns=int(result.num_turns)))
    ctx.run.finish_turn(
        turn_no, response=result.text, is_error=result.is_error, error=result.error,
        cost_usd=result.cost_usd, duration_ms=result.duration_ms, usage=result.usage,
        num_turns=result.num_turns,
    )
    status = getattr(result, "api_error_status", None)
    # (a status the agent read or told from its CLI's words, api_errors.status_of, or a failure the
    # agent says was the model API's: its words, a missing key or an unreachable server)
    api_failed = result.is_error and (status is not None or getattr(result, "terminal_reason", None) == "api_error")
    failed_as = api_errors.kind_of(status, result.error) if api_failed else None
    if result.is_error:
        save_work_in_progress(ctx, ticket, turn_no)  # what the failed turn changed is kept, whatever stops it
    if failed_as == api_errors.KEY and status is not None:
        # Every other ticket would fail the same way: a batch stops here (see the runner).
        raise ModelAccessError(
            f"{name}'s model API rejected the key (HTTP {status}) in turn "
            f"{turn_no} of ticket {ticket['id']!r}: check the credentials {name} uses"
            + (" (ANTHROPIC_API_KEY, or its login)" if kind in (None, "claude-code") else ""))
    if failed_as in api_errors.STOPS_BATCH:  # no such model or key, a used-up quota, no server: every ticket fails so
        raise ModelAccessError(f"{name} turn {turn_no} of ticket {ticket['id']!r} failed: "
                               f"{(result.error or 'no detail').rstrip('.')}.")
    if result.is_error:
        raise CodingAgentError(
            f"{name} turn {turn_no} of ticket {ticket['id']!r} failed: "
            f"{(result.error or 'no detail').rstrip('.')}. "
            f"The turns so far are kept (`middle log {ticket['id']}`); "
            f"{advice('failed-resumable', ticket['id'])}"
        )
    return result.text, result.session_id or session_id, saved


def _observe(ctx: TicketContext, state: TicketState, ticket: dict[str, Any], turn_no: int, prompt: str,
             text: str) -> None:
    """Conversation-watching backends see each round once: after the turn (run here or found
    finished by a takeover) unless the store records it given already. A kill between the give
    and the record (`memory.observed`) gives it again on takeover: the built-in backends take a
    round equal to their conversation's last as given already (backends/sliding_window,
    backends/hindsight/lifecycle.py)."""
    if ctx.memory is None or ctx.run.turn_observed(turn_no):
        return
    try:
        ctx.memory.observe_round(ticket["project_id"], f"run-{state['run_id']}", prompt, text)
    except Exception as exc:  # a view for the middle agent; never a reason to stop
        log.warning("memory could not observe turn %s: %s", turn_no, exc)
        return
    point("memory.observed")
    ctx.run.mark_observed(turn_no)


def _turn_end_hook(ctx: TicketContext, run_id: str, ticket: dict[str, Any], turn_no: int) -> None:
    """The plugins' on_turn_end once per turn: after the turn (run here or found finished by a
    takeover) unless the store records it ran. A kill between the hook and its record
    (`turn.hooked`) calls it again on takeover: (run_id, turn.turn_no) is the key a plugin can
    dedupe on (docs/hooks.md)."""
    if ctx.run.turn_hooked(turn_no):
        return
    call_hook(ctx.hooks, "on_turn_end", ticket=ctx.store.get_ticket(ticket["id"]), run_id=run_id,
              turn=TurnRecord.from_row(dict(ctx.run.turn(turn_no) or {})))
    point("turn.hooked")
    ctx.run.mark_hooked(turn_no)


def recall_turn(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    query = f"{state['last_prompt'][:500]}\n{state['last_response'][:500]}"
    return {"memories": _recall(runtime.context, state, query, f"turn {state['turn']}")}


def _conversation(ctx: TicketContext, state: TicketState) -> str:
    if ctx.memory is not None:
        try:
            view = ctx.memory.conversation_context(state["ticket"]["project_id"], f"run-{state['run_id']}")
        except Exception as exc:
            log.warning("memory conversation summary unavailable, using the transcript: %s", exc)
            view = None
        if view is not None and view.summary is not None:
            gap = list(view.gap_messages)
            latest = state["transcript"][-1]
            if not gap or gap[-1]["text"] != latest["response"]:
                # A summary may already cover the latest round; the agent must still read
                # Claude Code's latest answer verbatim to assess it.
                gap += [{"role": "prompt", "text": latest["prompt"]},
                        {"role": "response", "text": latest["response"]}]
            return prompts.transcript(state["transcript"], view.summary, gap)
    return prompts.transcript(state["transcript"])


def _changes_note(ctx: TicketContext, state: TicketState) -> str:
    """What the ticket's worktree holds now, so the agent's summary can name the changed paths."""
    ws = local_ticket(ctx, state).get("workspace")
    if not ws or ctx.worktrees is None:
        return ""
    try:
        changes = ctx.worktrees.changes(Workspace.from_dict(ws))
    except Exception as exc:  # a view for the agent; never a reason to stop
        log.warning("could not list the worktree's changes: %s", exc)
        return ""
    return prompts.changes_note(changes)


def assess(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    memories = state.get("memories", "")
    conversation = _conversation(ctx, state)
    note = _changes_note(ctx, state)
    if note:
        conversation += "\n\n" + note
    conversation, heard = review.for_assess(ctx, state, conversation)  # earlier rounds, new feedback
    decision = ctx.agent.assess(state["ticket"], conversation, memories, state["turn"])
    dropped = decision.only_shown(memories)  # memories_used names only what it was shown
    if dropped:
        log.info("the middle agent named memories it was not shown (%s): not recorded as used",
                 ", ".join(m.id for m in dropped))
    record = {**decision.record(), **heard}
    ctx.run.assess_turn(state["turn"], memories, record)
    ctx.say("middle agent: " + ("complete" if decision.complete else "another turn"))
    update = {"decision": record, "next_prompt": decision.next_prompt}
    if "feedback_seen" in heard:
        update["feedback_seen"] = heard["feedback_seen"]
    return update


def _limit_reason(state: TicketState, ctx: TicketContext) -> str | None:
    spent = spend_limit_reason(state, ctx)
    if spent:
        return spent
    decision = state.get("decision") or {}
    if not decision.get("next_prompt", "").strip():
        why = decision.get("summary", "").strip()
        return "the middle agent neither completed the ticket nor gave a next prompt" + (f": {why}" if why else "")
    return None


def route_after_assess(state: TicketState, runtime: Runtime[TicketContext]) -> str:
    if state["decision"]["complete"]:
        return "check"  # done means the project's checks pass (orchestrator.graph.checking)
    return "fail" if _limit_reason(state, runtime.context) else "work"


def commit(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    """Commit what Claude Code changed on the ticket's branch (nothing to do when running in place)."""
    ctx = runtime.context
    t = local_ticket(ctx, state)
    ws = t.get("workspace")
    if not ws or ctx.worktrees is None:
        return {"commit": None, "changes": []}
    summary = state["decision"].get("summary", "").strip()
    message = commit_message(t["title"], summary)  # a long title: a short subject, whole in the body
    workspace = Workspace.from_dict(ws)
    ctx.run.check()  # a stale owner (the run was taken over) commits nothing
    sha, changes = ctx.worktrees.commit(workspace, message)
    point("branch.committed")
    if sha is None:
        refuse_lost_work(ctx, state, workspace)  # a ticket is never complete without its commit
    ctx.run.set_fields(head_commit=sha, changes=changes)
    if sha and state.get("round", 1) > 1 and sha == review.previous_head(ctx.store, state["run_id"]):
        ctx.say(f"this round changed no files: {ws['branch']} stays at {sha[:10]}, the earlier rounds' "
                f"{len(changes)} changed file(s); {advice('complete', t['id'])}")
    elif sha:
        ctx.say(f"committed {len(changes)} changed file(s) on {ws['branch']} ({sha[:10]}): "
                f"{advice('complete', t['id'])}")
    else:
        ctx.say("the ticket changed no files: nothing to commit")
    if sha and ctx.worktrees.shared:
        worktrees = ctx.worktrees
        fenced_push(ctx, lambda: worktrees.push(workspace))  # nor pushes, nor overwrites a newer owner's push
        point("branch.pushed")
        ctx.say(f"pushed {ws['branch']} to {ctx.worktrees.remote or 'the shared repository ([project] repo_url)'}")
    if state.get("wip"):
        drop_work_in_progress(ctx, workspace, t["id"])  # the commit holds it now
    return {"commit": sha, "changes": changes, "ticket": t}


def index_summary(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx, t = runtime.context, state["ticket"]
    if ctx.memory is None:
        return {"indexed_docs": []}
    # The contract's line, then the decisions, rejected alternatives and human's instructions.
    doc = completion_doc(t["title"], t["description"], review.doc_decision(ctx, state))
    doc = ctx.memory.prepare_doc(doc)  # the exact text stored: cut to [memory] max_doc_chars
    # Kept with the ticket first (pending until memory has it), so a revert can delete exactly
    # this string later and a doc memory cannot take now is indexed later.
    ctx.run.check()  # nor adds to the project's memory
    if doc not in ctx.store.memory_docs(t["id"]):
        ctx.store.add_memory_doc(t["id"], t["project_id"], doc, run_id=state["run_id"], pending=True)
        point("memory.kept")
    try:
        ctx.memory.index(t["project_id"], [doc])
        point("memory.indexed")
    except Exception as exc:  # memory failures never stop a ticket
        log.warning("memory index of ticket %s failed; the ticket completes anyway: %s", t["id"], exc)
        ctx.say(f"{INDEX_FAILED_NOTE} ({exc}); the ticket completes anyway, and its doc is indexed at the "
                "next run's start or by `middle memory retry`")
        return {"indexed_docs": []}  # kept with the ticket all the same: a revert deletes any part that got in
    ctx.store.memory_doc_indexed(t["id"], doc)
    point("memory.marked")
    ctx.say(INDEXED_NOTE)
    review.retire_earlier(ctx, state, doc)
    return {"indexed_docs": [doc]}


def finalize(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    ctx = runtime.context
    summary = state["decision"].get("summary", "")
    ctx.run.complete(summary, say=ctx.say, commit=state.get("commit"))
    return {"status": "complete", "reason": ""}


def fail(state: TicketState, runtime: Runtime[TicketContext]) -> Update:
    """A limit, or the middle agent giving up: the run fails, with the ticket's work committed on
    its branch (orchestrator.graph.keep_work), so feedback or a resume continue it from there."""
    from orchestrator.graph.keep_work import during_check, keep_work

    ctx = runtime.context
    reason = _limit_reason(state, ctx) or "failed"
    checking_now = during_check(state)
    if checking_now:
        reason += f" ({checking_now})"
    t = local_ticket(ctx, state)
    try:
        sha = keep_work(ctx, state, t, reason)
    except GitError as exc:  # (the worktree removed by hand): the failure is still the agent's or the limit's
        ctx.say(f"could not commit the ticket's work on its branch: {exc}")
        sha = None
    if sha:
        branch = (t.get("workspace") or {}).get("branch", "its branch")
        # The advice already says where the work is ("its branch"): name the branch there, once.
        next_step = advice("failed-round" if state.get("round", 1) > 1 else "failed-work", t["id"])
        where = f"{branch} ({sha[:10]})"
        reason += "; " + (next_step.replace("its branch", where, 1) if "its branch" in next_step
                          else f"its work is committed on {where}: {next_step}")
    ctx.run.fail(reason, resumable=bool(sha), kept_work=bool(sha))
    return {"status": "failed", "reason": reason, "commit": sha, "ticket": t}
