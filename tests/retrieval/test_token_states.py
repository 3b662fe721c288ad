"""Token states (late chunking): one MiniLM pass per document gives its vector and vectors for
its parts; positions map back through clip_text's whitespace collapsing."""

from __future__ import annotations

import numpy as np
import pytest

from backends.retrieval import embedders
from backends.retrieval.embedders import minilm
from backends.retrieval.embedders.base import MAX_EMBED_CHARS, clip_text
from backends.retrieval.embedders.states import clip_map

pytestmark = pytest.mark.skipif(not minilm.available(), reason="the offline MiniLM is not installed")

DOC = ("Ticket: Fix CSV export for row tables.   The --csv option in\n\ndatasette/views/table.py "
       "raised KeyError.\tGrandma's banana bread recipe needs three ripe bananas.")


def part(text: str, words: str) -> list[tuple[int, int]]:
    start = text.index(words)
    return [(start, start + len(words))]


@pytest.mark.parametrize("text", ["a\x1cb\x1f c\u00a0d\u2028e  f\n\ng", "  lead and trail  ", "",
                                  "\u3000東\u3000京 x", "word " * (MAX_EMBED_CHARS // 3)])
def test_clip_map_is_clip_text_with_positions(text):
    clip = clip_map(text)
    assert clip.clipped == clip_text(text)
    for n, word in enumerate(clip.clipped.split(" ") if clip.clipped else []):
        at = int(clip.clip_starts[n])
        back = int(clip.to_text(np.asarray([at]))[0])
        assert text[back:back + len(word)] == word


def test_the_document_vector_is_exactly_embed_documents():
    model = embedders.make_embedder("minilm")
    long = " ".join(f"word{i}" for i in range(400))
    for text in (DOC, long, "", "   ", "short"):
        assert np.array_equal(model.token_states(text, len(text)).vector,
                              model.embed_documents([text])[0])
    prefixed = embedders.make_embedder("minilm", document_prefix="passage: ")
    states = prefixed.token_states(DOC)
    assert np.array_equal(states.vector, prefixed.embed_documents([DOC])[0])
    assert (states.starts[:2] == -1).all()  # the prefix's pieces belong to no part


def test_tokens_point_back_at_the_text_they_read():
    states = embedders.make_embedder("minilm").token_states(DOC)
    pieces = [DOC[a:b].lower() for a, b in zip(states.starts, states.ends)]
    assert pieces[:6] == ["ticket", ":", "fix", "cs", "v", "export"]
    assert "keyerror" in "".join(pieces) and "datasette" in "".join(pieces)


def test_a_part_is_pooled_in_context_unit_norm_and_deterministic():
    model = embedders.make_embedder("minilm")
    states = model.token_states(DOC)
    csv = states.pool(part(DOC, "The --csv option in\n\ndatasette/views/table.py raised KeyError."))
    bread = states.pool(part(DOC, "Grandma's banana bread recipe needs three ripe bananas."))
    assert np.isclose(np.linalg.norm(csv), 1.0, atol=1e-5)
    assert np.array_equal(csv, model.token_states(DOC).pool(
        part(DOC, "The --csv option in\n\ndatasette/views/table.py raised KeyError.")))
    alone_csv, alone_bread = model.embed_documents(
        ["The --csv option in datasette/views/table.py raised KeyError.",
         "Grandma's banana bread recipe needs three ripe bananas."])
    # Each part is nearest its own text embedded alone.
    assert csv @ alone_csv > csv @ alone_bread + 0.1
    assert bread @ alone_bread > bread @ alone_csv + 0.1
    assert states.pool([]) is None and states.pool([(len(DOC) + 5, len(DOC) + 9)]) is None


def test_parts_past_the_first_window_need_reach():
    model = embedders.make_embedder("minilm")
    text = " ".join(f"word{i}" for i in range(300)) + " The submarine engine failed at sea."
    tail = part(text, "The submarine engine failed at sea.")
    first = model.token_states(text)  # the document's own 256 tokens only
    assert first.pool(tail) is None and first.reach < tail[0][0]
    further = model.token_states(text, tail[0][1])
    assert np.array_equal(further.vector, first.vector)
    pooled = further.pool(tail)
    alone = model.embed_documents(["The submarine engine failed at sea.", "word1 word2 word3"])
    assert pooled @ alone[0] > pooled @ alone[1]


def test_models_without_token_states_say_so():
    assert embedders.make_embedder("hashing").token_states(DOC) is None


def test_many_documents_read_together_read_as_each_alone():
    """An import reads its docs' states together (both cores on whole calls): every doc's
    vector, states and positions are those it gets alone, whatever it was read beside."""
    model = embedders.make_embedder("minilm")
    long = " ".join(f"word{i}" for i in range(300)) + " The submarine engine failed at sea."
    wanted = [(DOC, 0), (long, len(long)), ("", 0), (long, 0), ("short", 5), (DOC, len(DOC))]
    wanted += [(f"Ticket {n}: fix the {'csv ' * n}export in views/table.py.", 0) for n in range(40)]
    together = model.token_states_many(wanted)
    assert minilm._bulk is not None  # the calls ran on the one-thread bulk session, both cores at once
    assert len(together) == len(wanted)
    for (text, reach), got in zip(wanted, together):
        alone = model.token_states(text, reach)
        assert np.array_equal(got.vector, alone.vector)
        assert np.array_equal(got.states, alone.states)
        assert np.array_equal(got.starts, alone.starts) and np.array_equal(got.ends, alone.ends)
    assert together[1].states.shape[0] > together[3].states.shape[0]  # reach read a second window
    assert model.token_states_many([]) == []
    assert embedders.make_embedder("hashing").token_states_many([(DOC, 0)]) == [None]
