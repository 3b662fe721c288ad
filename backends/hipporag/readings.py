"""A passage's reading (fact_vectors = "passage"): its vector, and the vectors of the entities
and facts it states, all from one model pass over the passage (see embedders.states).

An entity or fact is stored once however many passages state it; its vector is its reading in
the earliest passage still holding it (lowest id: ids grow in insertion order). Deleting that
passage re-reads the next one, so deleting a doc leaves the vectors a store that never held
it would have. Nothing else depends on these vectors' history: in this kind no fact vector is
composed from entity vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from backends.retrieval.embedders import Embedder

from .extract import Extraction


@dataclass
class Reading:
    vector: np.ndarray  # the passage's own vector (what embed_documents gives)
    entities: dict[str, np.ndarray] = field(default_factory=dict)  # name -> its first mention
    facts: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)  # where stated


def read(embedder: Embedder, text: str, extraction: Extraction) -> Reading | None:
    """The passage read once; None when the embedder gives no token states (then every part
    is embedded alone). Parts the extractor does not place (an LLM's) have no reading."""
    ranges = [*extraction.mentions.values(), *extraction.evidence]
    reach = max((end for r in ranges for _, end in r), default=0)
    states = embedder.token_states(text, reach)
    if states is None:
        return None
    out = Reading(states.vector)
    for name, where in extraction.mentions.items():
        if (vector := states.pool(where)) is not None:
            out.entities[name] = vector
    for triple, where in zip(extraction.triples, extraction.evidence):
        if triple not in out.facts and (vector := states.pool(where)) is not None:
            out.facts[triple] = vector  # a fact stated twice is read where first stated
    return out
