"""The graph's side of review rounds (`middle feedback`): what a round starts from, the human's
feedback at each assess, and the ticket's memory doc over all its rounds.

Everything here is read from the ticket store by run id, so a round resumed after a crash (or
started by any driver of the graph) sees the same round as the process that began it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.agent import prompts
from orchestrator.graph.context import TicketContext
from orchestrator.graph.state import TicketState
from orchestrator.killpoints import point
from tickets.model import TurnRow
from tickets.rounds import HUMAN

if TYPE_CHECKING:
    from tickets.store import TicketStore

HISTORY_CHARS = 12_000  # of the earlier rounds shown to the agent (the newest kept)
TURN_CHARS = 1500  # of each earlier prompt and answer
NOTE_KEYS = ("decisions", "rejected", "instructions")


def lineage(store: TicketStore, run_id: str) -> list[dict[str, Any]]:
    """The runs of the ticket's current change up to `run_id`, oldest first: its rounds back to
    the round-1 run (a first run or a rerun) they continue."""
    run = store.get_run(run_id)
    runs = store.list_runs(run["ticket_id"])
    ids = [r["id"] for r in runs]
    chain: list[dict[str, Any]] = []
    for r in reversed(runs[: ids.index(run_id) + 1]):
        chain.append(r)
        if store.round_of(r["id"]) <= 1:
            break
    return list(reversed(chain))


def feedback_texts(event: dict[str, Any]) -> list[str]:
    """The human's words in one feedback event (a round's opening one carries earlier ones)."""
    return [*event.get("carried", []), event["text"]]


def previous_head(store: TicketStore, run_id: str) -> str | None:
    """The branch's head when this round started (the commit the round before it left), or
    None for a round-1 run."""
    earlier = lineage(store, run_id)[:-1]
    return earlier[-1].get("head_commit") if earlier else None


def round_state(ctx: TicketContext, run_id: str) -> dict[str, Any]:
    """What load_ticket adds for the run: its round; for a later round also the Claude Code
    session it resumes, the earlier rounds as text and the feedback that opened it."""
    store = ctx.store
    number = store.round_of(run_id)
    if number <= 1:
        return {"round": 1, "feedback_seen": 0}
    opening = store.feedback(run_id)[0]
    earlier = lineage(store, run_id)[:-1]
    session = next((t["session_id"] for r in reversed(earlier)
                    for t in reversed(store.list_turns(run_id=r["id"]))
                    if t["status"] == "done" and t.get("session_id")), "")
    return {"round": number, "session_id": session, "history": history(store, earlier),
            "round_feedback": feedback_texts(opening), "conflict": opening.get("conflict", ""),
            "feedback_seen": opening["id"]}


def history(store: TicketStore, runs: list[dict[str, Any]]) -> str:
    """The earlier rounds as the agent reads them: each round's feedback, turns and summary."""
    blocks = []
    for run in runs:
        number = store.round_of(run["id"])
        lines = [f"=== Round {number} ==="]
        for event in store.feedback(run["id"]):
            label = event.get("label") or HUMAN
            lines.append(f"{label[0].upper()}{label[1:]}: {' '.join(feedback_texts(event))}")
        turns = store.list_turns(run_id=run["id"])
        for turn in turns:
            lines += [f"--- Turn {turn['turn_no']} ---", prompts.ASKED, _cut(turn["prompt"]),
                      prompts.ANSWERED, _cut(turn.get("response") or "")]
        summary = final_decision(turns).get("summary")
        if summary:
            lines.append(f"The middle agent's summary: {summary}")
        blocks.append("\n".join(lines))
    text = "\n\n".join(blocks)
    return text if len(text) <= HISTORY_CHARS else "[earlier part left out]\n" + text[-HISTORY_CHARS:]


def _cut(text: str) -> str:
    return text if len(text) <= TURN_CHARS else text[:TURN_CHARS] + " … [cut]"


def final_decision(turns: list[TurnRow]) -> dict[str, Any]:
    """The decision of a run's last assessed turn ({} when none)."""
    return next((d for t in reversed(turns) if (d := t["decision"])), {})


def revise_prompt(ctx: TicketContext, state: TicketState) -> str | None:
    """A later round's first prompt, from the human's feedback; None for a first run (plan it)."""
    if state.get("round", 1) <= 1:
        return None
    opening = ctx.store.feedback(state["run_id"])[:1]
    ctx.say(f"round {state['round']}: the middle agent reads {opening[0]['label'] if opening else HUMAN}")
    return ctx.agent.revise(state["ticket"], state.get("history", ""), state.get("round_feedback", []),
                            state.get("memories", ""), state.get("conflict") or None)


def resumes_session(state: TicketState, turn_no: int) -> bool:
    """Whether the turn resumes the state's Claude Code session: every turn after the first, and
    the first of a later round (the session of the round before)."""
    return bool(state.get("session_id")) and (turn_no > 1 or state.get("round", 1) > 1)


def session_kind(ctx: TicketContext, ticket_id: str, session_id: str | None) -> str | None:
    """The coding agent kind the ticket's turns in `session_id` ran on (None: unknown, e.g. stored
    before turns recorded it, or no such turn)."""
    if not session_id:
        return None
    for turn in reversed(ctx.store.list_turns(ticket_id=ticket_id)):
        if turn["session_id"] == session_id:
            return turn.get("coding_agent")
    return None


def session_lost(result: Any) -> bool:
    """Whether a resumed turn failed because Claude Code has no such session here (its sessions
    live under CLAUDE_CONFIG_DIR: another machine, `--fake` then a real run, a cleaned config)."""
    return bool(result.is_error and "to resume here" in (result.error or ""))


def recap(state: TicketState, prompt: str) -> str:
    """The prompt for a new Claude Code session in the ticket's worktree: what was done so far."""
    lines = ["You are continuing work on this directory that an earlier session began; that session "
             "is not available. Its work is in the files here (committed on this branch). What it was "
             "asked and answered, for context:"]
    if state.get("history"):
        lines.append(state["history"])
    for r in state.get("transcript", []):
        lines += [f"--- Turn {r['turn']} of this round ---", prompts.ASKED, _cut(r["prompt"]),
                  prompts.ANSWERED, _cut(r.get("response") or "")]
    return "\n".join(lines) + f"\n\n## Now\n{prompt}"


def for_assess(ctx: TicketContext, state: TicketState, conversation: str) -> tuple[str, dict[str, Any]]:
    """The conversation with the earlier rounds before it and the feedback sent since the last
    assess after it; the state update (`feedback_seen`) and the feedback for the decision record."""
    if state.get("history"):
        conversation = f"{prompts.EARLIER_ROUNDS}\n{state['history']}\n\n{prompts.THIS_ROUND}\n{conversation}"
    seen = state.get("feedback_seen", 0)
    new = [e for e in ctx.store.feedback(state["run_id"]) if e["id"] > seen]
    if not new:
        return conversation, {}
    texts = [t for e in new for t in feedback_texts(e)]
    ctx.say(f"the human's feedback reached the middle agent ({len(texts)} message(s))")
    return conversation + "\n\n" + prompts.feedback_note(texts), {
        "feedback_seen": max(e["id"] for e in new), "feedback": texts}


def doc_decision(ctx: TicketContext, state: TicketState) -> dict[str, Any]:
    """The decision the ticket's memory doc is written from: this run's, joined with the earlier
    rounds' (summaries in order, notes kept once) and every feedback the human sent, which is
    exactly what the next related ticket must not get wrong."""
    store, current = ctx.store, dict(state["decision"])
    runs = lineage(store, state["run_id"])
    feedback = [t for r in runs for e in store.feedback(r["id"]) for t in feedback_texts(e)]
    if len(runs) == 1 and not feedback:
        return current
    decisions = [final_decision(store.list_turns(run_id=r["id"])) for r in runs[:-1]] + [current]
    summaries = [d.get("summary", "").strip() for d in decisions]
    summary = " ".join([summaries[0]] + [f"Round {n}: {s}" for n, s in enumerate(summaries[1:], 2) if s]).strip()
    merged: dict[str, Any] = {**current, "summary": summary, "feedback": list(dict.fromkeys(feedback))}
    for key in NOTE_KEYS:
        merged[key] = list(dict.fromkeys(i for d in decisions for i in d.get(key) or []))
    return merged


def retire_earlier(ctx: TicketContext, state: TicketState, doc: str) -> None:
    """After a later round indexed its doc: the ticket's earlier docs leave memory (the new one
    says all they said, and more)."""
    if state.get("round", 1) <= 1 or ctx.memory is None:
        return
    t = state["ticket"]
    old = [d for d in ctx.store.memory_docs(t["id"]) if d != doc]
    if not old:
        return
    try:
        ctx.memory.delete(t["project_id"], old)
    except Exception as exc:  # memory failures never stop a ticket; a revert still deletes them
        ctx.say(f"could not remove the ticket's earlier memory doc(s) ({exc}); kept")
        return
    point("memory.retired")  # (a takeover runs index_summary again: the delete finds nothing, this marks them)
    ctx.store.retire_memory_docs(t["id"], old)
    ctx.say(f"replaced the ticket's earlier memory doc(s) ({len(old)}) with this round's")
