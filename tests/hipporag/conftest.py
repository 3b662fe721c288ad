"""Fixtures for the hipporag tests: a private cache dir, backend openers, an honest fake LLM."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backends.hipporag import HippoRAGBackend
from backends.retrieval.cache import CACHE_ENV

NOW = 1_750_000_000.0


@pytest.fixture
def musique(shared_data) -> Path:
    return shared_data("musique100/openie_triples.json").parent


@pytest.fixture
def recording_llm():
    """recording_llm(answer) -> a RecordingLLM answering with answer(system, prompt)."""
    return RecordingLLM


@pytest.fixture
def openie_llm():
    """openie_llm(entities, triples): a RecordingLLM answering OpenIE by the passage's marker."""
    return lambda entities, triples: RecordingLLM(openie_answer(entities, triples))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    # Embedding and OpenIE caches off the user's ~/.cache; one per session.
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "hipporag-cache"))


@pytest.fixture
def open_backend(tmp_path) -> Iterator[Callable[..., HippoRAGBackend]]:
    """open_backend(name="store", llm=None, **options): hashing embedder unless told otherwise."""
    opened: list[HippoRAGBackend] = []

    def open_(name: str = "store", llm=None, **options) -> HippoRAGBackend:
        options.setdefault("embedder", "hashing")
        backend = HippoRAGBackend(tmp_path / name, HippoRAGBackend.Options(**options), llm)
        backend.clock = lambda: NOW  # one moment for every store: recency ties, results compare
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        backend.close()


class RecordingLLM:
    """A TextLLM that answers from a function of (system, prompt) and records every call."""

    model = "fake-memory-model"

    def __init__(self, answer: Callable[[str, str], str]):
        self.answer = answer
        self.calls: list[dict[str, str]] = []

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        self.calls.append({"system": system, "prompt": prompt})
        return self.answer(system, prompt)


def openie_answer(entities: dict[str, list[str]], triples: dict[str, list[list[str]]]):
    """Replies by the passage's marker word: NER JSON, then triples JSON (or raw text)."""

    def answer(system: str, prompt: str) -> str:
        marker = next(m for m in entities if m in prompt.split("Named entities:")[0])
        if "named entities from a passage" in system:
            return json.dumps({"named_entities": entities[marker]})
        reply = triples[marker]
        return reply if isinstance(reply, str) else json.dumps({"triples": reply})

    return answer
