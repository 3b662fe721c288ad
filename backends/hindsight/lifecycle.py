"""The turn-retaining lifecycle: retain a ticket conversation every N turns (with overlap), tagged with
its conversation, memory text stripped. Off by default (the workflow indexes only at completion)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from orchestrator.plugin_api import check_texts

from .extract import strip_memory_text
from .retain import RetainItem

if TYPE_CHECKING:
    from .parts import HindsightParts

CONVERSATION_TAG = "conversation:"


def conversation_tag(conversation_id: str) -> str:
    return f"{CONVERSATION_TAG}{conversation_id}"


def window_text(rounds: list[tuple[int, str, str]]) -> str:
    """Rounds as one document, memory text stripped from both sides (no feedback loop)."""
    parts = []
    for seq, prompt, response in rounds:
        parts.append(f"[turn {seq}] The middle agent asked Claude Code: {strip_memory_text(prompt)}\n"
                     f"[turn {seq}] Claude Code answered: {strip_memory_text(response)}")
    return "\n\n".join(parts)


def round_digest(prompt: str, response: str) -> str:
    """A round's fingerprint: the bank keeps the last one of each conversation (its rounds
    themselves may be gone, retained and deleted from pending_rounds)."""
    return hashlib.sha256(f"{len(prompt)}:{prompt}{response}".encode()).hexdigest()


def observe_round(hb: HindsightParts, conversation_id: str, prompt: str, response: str) -> None:
    """Buffer the round in the bank (another process may see the next one); every N rounds
    retain the window since the last retain plus `retain_overlap_turns` earlier rounds.

    A round equal to the conversation's last is taken as given already: a run killed after
    giving it and before the ticket store recorded that gives it again on takeover
    (orchestrator.graph.nodes._observe, kill point `memory.observed`); one round is kept once."""
    every = hb.options.retain_every_turns
    if every <= 0:
        return
    conversation_id, prompt, response = check_texts([conversation_id, prompt, response], "round")
    key, last_key = f"lifecycle:{conversation_id}", f"last_round:{conversation_id}"
    digest = round_digest(prompt, response)
    with hb.bank.write() as conn:
        if hb.bank.meta(conn, last_key) == digest:
            return
        hb.bank.set_meta(conn, last_key, digest)
        seq = (conn.execute("SELECT MAX(seq) FROM pending_rounds WHERE conversation_id = ?",
                            (conversation_id,)).fetchone()[0] or int(hb.bank.meta(conn, key) or 0)) + 1
        conn.execute("INSERT INTO pending_rounds VALUES (?, ?, ?, ?)", (conversation_id, seq, prompt, response))
        last = int(hb.bank.meta(conn, key) or 0)
        if seq - last < every:
            return
        first = max(1, last + 1 - hb.options.retain_overlap_turns)
        rounds = conn.execute("SELECT seq, prompt, response FROM pending_rounds WHERE conversation_id = ? "
                              "AND seq >= ? ORDER BY seq", (conversation_id, first)).fetchall()
    tags = [conversation_tag(conversation_id)] if hb.options.tag_conversations else []
    item = RetainItem(window_text(rounds), tags=tags, key=f"{conversation_id}:turns {rounds[0][0]}-{seq}",
                      source="turns")
    hb._retain([item])  # committed first: a crash before the bookkeeping below retains it again, no loss
    with hb.bank.write() as conn:
        hb.bank.set_meta(conn, key, str(seq))
        keep_from = seq + 1 - hb.options.retain_overlap_turns
        conn.execute("DELETE FROM pending_rounds WHERE conversation_id = ? AND seq < ?",
                     (conversation_id, keep_from))
