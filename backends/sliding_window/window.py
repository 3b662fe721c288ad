"""Sliding-window arithmetic: which sequence range a summary covers."""

from __future__ import annotations


def window_range(last_seq: int, window_size: int) -> tuple[int, int]:
    """Range (start, end) of a ticket-conversation summary ending at last_seq.

    The start is bumped to the next even number so a prompt (even seq) is never separated from
    its response (odd seq); the window may then hold one message fewer than window_size.
    """
    end = last_seq
    start = max(0, end - window_size + 1)
    if start % 2:
        start += 1
    return start, end


def doc_window(live_seqs: list[int], window_size: int) -> tuple[int, int]:
    """Range (start, end) covering the newest window_size docs, given the live doc seqs in order.

    Docs are counted, not seqs, because a deleted doc leaves a hole in the sequence.
    """
    if not live_seqs:
        raise ValueError("doc_window needs at least one doc")
    newest = live_seqs[-window_size:]
    return newest[0], newest[-1]
