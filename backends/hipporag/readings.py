"""A passage's reading (fact_vectors = "passage"): its vector, and the vectors of the entities
and facts it states, all from one model pass over the passage (see embedders.states).

An entity or fact is stored once however many passages state it; its vector is its reading in
the earliest passage still holding it (lowest id: ids grow in insertion order). Deleting that
passage re-reads the next one, so deleting a doc leaves the vectors a store that never held
it would have. Nothing else depends on these vectors' history: in this kind no fact vector is
composed from entity vectors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from backends.retrieval.cache import EmbeddingCache
from backends.retrieval.embedders import Embedder
from backends.retrieval.embedders.states import STATES_AT_ONCE

from .extract import Extraction, Ranges


@dataclass
class Reading:
    vector: np.ndarray  # the passage's own vector (what embed_documents gives)
    entities: dict[str, np.ndarray] = field(default_factory=dict)  # name -> its first mention
    facts: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)  # where stated


def read(embedder: Embedder, text: str, extraction: Extraction,
         cache: EmbeddingCache | None = None) -> Reading | None:
    """The passage read once; None when the embedder gives no token states (then every part
    is embedded alone). Parts the extractor does not place (an LLM's) have no reading. With
    a cache, a passage read before (a rerun, a resumed benchmark) costs no model pass."""
    return read_many(embedder, [(text, extraction)], cache)[0]


def read_many(embedder: Embedder, wanted: Sequence[tuple[str, Extraction]],
              cache: EmbeddingCache | None = None) -> list[Reading | None]:
    """`read` of each (text, extraction), in order, the model passes of many passages together
    (an index of many docs keeps all cores busy); each reading is what it is alone."""
    out: list[Reading | None] = [None] * len(wanted)
    todo: list[tuple[int, str, dict[object, Ranges], dict[object, bytes] | None]] = []
    for n, (text, extraction) in enumerate(wanted):
        parts: dict[object, Ranges] = {name: where for name, where in extraction.mentions.items()}
        for triple, where in zip(extraction.triples, extraction.evidence):
            parts.setdefault(triple, where)  # a fact stated twice is read where first stated
        keys = _keys(embedder, text, parts) if cache is not None and embedder.cacheable else None
        if keys is not None and cache is not None:
            found = cache.get(embedder.model_id, list(keys.values()), embedder.dimension)
            if len(found) == len(keys):  # read before, every part: no model pass
                out[n] = _reading({part: found[key] for part, key in keys.items()})
                continue
        todo.append((n, text, parts, keys))
    for start in range(0, len(todo), STATES_AT_ONCE):
        chunk = todo[start:start + STATES_AT_ONCE]
        reaches = [max((end for where in parts.values() for _, end in where), default=0)
                   for _, _, parts, _ in chunk]
        got = embedder.token_states_many([(text, reach) for (_, text, _, _), reach in zip(chunk, reaches)])
        for (n, _, parts, keys), states in zip(chunk, got):
            if states is None:
                continue
            vectors: dict[object, np.ndarray | None] = {part: states.pool(where)
                                                        for part, where in parts.items()}
            vectors[PASSAGE] = states.vector
            if keys is not None and cache is not None:  # a part the model did not reach is cached as zeros (no reading)
                cache.put(embedder.model_id, [(keys[p], np.zeros_like(states.vector) if v is None else v)
                                              for p, v in vectors.items()])
            out[n] = _reading(vectors)
    return out


PASSAGE = "\x00passage"  # the key of the passage's own vector among a reading's parts


def _keys(embedder: Embedder, text: str, parts: dict[object, Ranges]) -> dict[object, bytes]:
    """Cache keys: the passage's own is embed_documents' (the same vector); a part's hashes
    the text with its ranges."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    keys = {part: hashlib.sha256(f"reading-v1\x00{digest}\x00{json.dumps(where)}".encode()).digest()
            for part, where in parts.items()}
    keys[PASSAGE] = hashlib.sha256(embedder.document_inputs([text])[0].encode(
        "utf-8", "surrogatepass")).digest()
    return keys


def _reading(vectors: dict[object, np.ndarray | None]) -> Reading | None:
    passage = vectors.pop(PASSAGE, None)
    if passage is None:
        return None
    out = Reading(passage)
    for part, vector in vectors.items():
        if vector is not None and vector.any():
            target = out.entities if isinstance(part, str) else out.facts
            target[part] = vector  # type: ignore[index]
    return out
