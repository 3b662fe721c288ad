"""The middle agent's system prompt and the user messages it sees at planning and each assessment."""

from __future__ import annotations

from typing import Any

# Markers the offline fake model (orchestrator.fake_api) reads these prompts by; it imports them
# from here, so rewording a prompt cannot silently break the demo model.
MIDDLE_AGENT_MARKER = "You are the middle agent"
NOT_RUN_YET = "Claude Code has not been run yet."
SENT = "You sent Claude Code:"
RESPONDED = "Claude Code responded:"
DESCRIPTION = "Description:"
CONVERSATION = "Conversation so far"

SYSTEM_PROMPT = MIDDLE_AGENT_MARKER + """: a senior developer who works through a ticket by \
supervising Claude Code, a coding agent that edits the project's files. You never edit files \
yourself. You write the prompts Claude Code receives, read what it answers, and decide when the \
ticket is done.

You have access to project memory. When a message starts with "Memories invoked:", that is recall \
from past tickets of this project (what was done, learned and overcome); each memory starts with \
its id in [brackets]. Use it only for your own reasoning, for example to avoid a known mistake or \
reuse an approach that worked. Never paste memory into a prompt for Claude Code as if it were \
Claude's own output or the user's request; Claude Code sees only the prompts you write.

Reply with one JSON object and nothing else."""

PLAN_INSTRUCTIONS = NOT_RUN_YET + """ Write the first prompt for it: a clear, \
self-contained task instruction for this ticket. Reply as JSON: {"prompt": "..."}."""

ASSESS_INSTRUCTIONS = """Decide whether the ticket is complete. If it is, set "complete" to true \
and write a short "summary" of what was done, learned and overcome (it is kept as project memory \
for future tickets), and list what a later ticket must know: "decisions" (each decision made and \
why), "rejected" (each alternative considered and rejected, and why) and "instructions" (each \
instruction or rule the human gave in the ticket, in their words); leave a list empty when there \
is nothing for it. If not, set "complete" to false and write "next_prompt", the exact next \
prompt for Claude Code. Either way, list in "memories_used" the recalled memories you relied on \
(the id in [brackets] before each, and a few words why); leave it empty when none helped. Reply \
as JSON: {"complete": bool, "summary": "...", "next_prompt": "...", "decisions": ["..."], \
"rejected": ["..."], "instructions": ["..."], "memories_used": [{"id": "...", "why": "..."}]}."""

def with_memories(memories: str, message: str) -> str:
    """The memory contract: when non-empty, memories are prepended to the user message, then a blank line."""
    return f"{memories}\n\n{message}" if memories else message


def plan_message(ticket: dict[str, Any], memories: str) -> str:
    # The description comes last: it is the ticket's own words, and the offline demo model
    # takes everything after "Description:" as the task.
    body = (
        f"Ticket: {ticket['title']}\n"
        f"Project: {ticket['project_id']} at {ticket['project_path']}\n\n"
        f"{PLAN_INSTRUCTIONS}\n\n"
        f"{DESCRIPTION}\n{ticket.get('description') or '(none)'}"
    )
    return with_memories(memories, body)


def transcript(
    turns: list[dict[str, Any]], summary: str | None = None, gap: list[dict[str, Any]] | None = None
) -> str:
    """The conversation as the agent reads it: every turn, or a summary plus the gap messages."""
    if summary is None:
        parts = []
        for r in turns:
            parts.append(
                f"--- Turn {r['turn']} ---\n{SENT}\n{r['prompt']}\n"
                f"{RESPONDED}\n{r['response']}"
            )
        return "\n\n".join(parts)
    lines = [f"Summary of the earlier turns:\n{summary}", "", "Messages since that summary:"]
    for m in gap or []:
        who = SENT if m["role"] == "prompt" else RESPONDED
        lines.append(f"{who}\n{m['text']}")
    return "\n".join(lines)


def assess_message(
    ticket: dict[str, Any], conversation: str, memories: str, turn: int, max_turns: int
) -> str:
    body = (
        f"Ticket: {ticket['title']}\n"
        f"{DESCRIPTION}\n{ticket.get('description') or '(none)'}\n\n"
        f"{CONVERSATION} (turn {turn} of at most {max_turns}):\n{conversation}\n\n"
        f"{ASSESS_INSTRUCTIONS}"
    )
    return with_memories(memories, body)


CHANGED = "Files changed on the ticket's branch so far (git diff against where it started):"


def changes_note(changes: list[dict[str, Any]], limit: int = 50) -> str:
    """The ticket worktree's changed paths for the assessment, so the summary can name them."""
    if not changes:
        return CHANGED + " none."
    lines = []
    for c in changes[:limit]:
        counts = "binary" if c.get("added") is None else f"+{c['added']} -{c['deleted']}"
        lines.append(f"- {c['path']} ({counts})")
    if len(changes) > limit:
        lines.append(f"- … and {len(changes) - limit} more")
    return CHANGED + "\n" + "\n".join(lines)


# -- review rounds (`middle feedback`): the human's words on a finished ticket ----------------------
REVIEW = "The human reviewed the ticket's change and asks:"  # the demo model reads the request after it
ASKED = "Claude Code was asked:"  # the earlier rounds' turns (not SENT/RESPONDED: those are this round's)
ANSWERED = "Claude Code answered:"
EARLIER_ROUNDS = "Earlier rounds of this ticket (their work is committed on its branch):"
THIS_ROUND = "This round:"
LATE_FEEDBACK = ("The human sent this feedback while Claude Code worked; act on it before you "
                 "complete the ticket:")

REVISE_INSTRUCTIONS = """The ticket was completed before, and the human has reviewed its change. \
Claude Code continues its own session on the ticket's branch, so it remembers the earlier work. \
Write the next prompt for Claude Code: a clear instruction that carries out the human's request \
below (it is the human's decision: follow it). Reply as JSON: {"prompt": "..."}."""


def revise_message(ticket: dict[str, Any], history: str, feedback: list[str], memories: str,
                   conflict: str | None = None) -> str:
    """The first request of a review round: the ticket, its earlier rounds, the human's words last."""
    parts = [f"Ticket: {ticket['title']}",
             f"Project: {ticket['project_id']} at {ticket['project_path']}", "",
             f"The ticket's description:\n{ticket.get('description') or '(none)'}", "",
             f"{EARLIER_ROUNDS}\n{history or '(none recorded)'}"]
    if conflict:
        parts += ["", "Merging the ticket's branch into the base branch failed: " + conflict
                  + ". Claude Code works on the branch, so the change must be made to merge cleanly."]
    parts += ["", REVISE_INSTRUCTIONS, "", REVIEW, "\n\n".join(f.strip() for f in feedback)]
    return with_memories(memories, "\n".join(parts))


def feedback_note(feedback: list[str]) -> str:
    """Feedback that arrived during the run, for the next assessment."""
    return LATE_FEEDBACK + "\n" + "\n".join(f"- {' '.join(f.split())}" for f in feedback)


# -- the check loop: "complete" did not pass the project's checks ------------------------------------
CHECK_FAILED = "The project's checks failed after you marked the ticket complete:"  # the demo model reads after it

CORRECT_INSTRUCTIONS = """You marked the ticket complete, but a check the project requires failed on \
the ticket's worktree (below: the command, how it ended, the tests that fail because of this \
ticket, and the end of its output). The ticket is not done until it passes. Claude Code continues \
its own session, so it remembers its work. Write the next prompt for Claude Code: what to fix, \
with the failing tests and the relevant lines of the output it needs. Tests listed as already \
failing before this ticket are not its to fix. Reply as JSON: {"prompt": "..."}."""


def correct_message(ticket: dict[str, Any], failure: str, memories: str) -> str:
    """The request after a failed check: the ticket, then the failure (the demo model reads it last)."""
    body = (f"Ticket: {ticket['title']}\n"
            f"Project: {ticket['project_id']} at {ticket['project_path']}\n\n"
            f"{CORRECT_INSTRUCTIONS}\n\n{CHECK_FAILED}\n{failure}")
    return with_memories(memories, body)
