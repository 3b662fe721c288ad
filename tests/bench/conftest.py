"""Small synthetic datasets in the shapes of shared/data (MuSiQue folder, LoCoMo file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.retrieval.cache import CACHE_ENV
from orchestrator.fake_api.pytest_fixtures import claude_cli, claude_env, fake_api  # noqa: F401  (fixtures)

TOPICS = [
    ("Zorbia", "The Quellan river flows through Zorbia. Its capital is Mertz. Zorbia exports tin."),
    ("Mertz", "Mertz is the capital of Zorbia. It was founded in 1432 by Odo the Tall."),
    ("Odo the Tall", "Odo the Tall was a merchant prince. He was born in Varnholt."),
    ("Varnholt", "Varnholt is a port town. It is known for its glass works."),
    ("Glass works", "Glass works melt sand into glass. Furnaces run day and night."),
    ("Tin mining", "Tin is mined in the hills. Miners carry lamps underground."),
    ("Lamps", "Oil lamps light the tunnels. Lamp oil is pressed from seeds."),
    ("Seeds", "Seeds are sown in spring. The harvest comes in autumn."),
    ("Autumn fair", "The autumn fair sells apples. Jugglers perform in the square."),
    ("Jugglers", "Jugglers train for years. Their clubs are made of ash wood."),
    ("Ash wood", "Ash wood is light and strong. It is used for tool handles."),
    ("Tool handles", "Tool handles wear out. Smiths replace them every winter."),
]


def paragraph(title: str, supporting: bool) -> dict:
    text = dict(TOPICS)[title]
    return {"idx": 0, "title": title, "paragraph_text": text, "is_supporting": supporting}


@pytest.fixture(autouse=True)
def _private_embedding_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "embedding-cache"))


@pytest.fixture
def musique_dir(tmp_path) -> Path:
    """Three questions: two with one gold passage, one with two (one of them hard for BM25)."""
    folder = tmp_path / "mini-musique"
    folder.mkdir()
    corpus = [{"title": t, "text": x} for t, x in TOPICS]
    questions = [
        {"question": "Which river flows through Zorbia?",
         "paragraphs": [paragraph("Zorbia", True), paragraph("Mertz", False)]},
        {"question": "Who founded Mertz in 1432?",
         "paragraphs": [paragraph("Mertz", True), paragraph("Lamps", False)]},
        {"question": "Where was Odo the Tall born, and what wood are juggling clubs made of?",
         "paragraphs": [paragraph("Odo the Tall", True), paragraph("Jugglers", True)]},
    ]
    (folder / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    (folder / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    return folder


@pytest.fixture
def locomo_file(tmp_path) -> Path:
    turns1 = [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started learning the cello."},
        {"speaker": "Ana", "dia_id": "D1:3", "text": "Thanks!"},
    ]
    turns2 = [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "My cello teacher moved to Lisbon.",
         "blip_caption": "a photo of a cello case"},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Thanks!"},  # same words as D1:3
    ]
    sample = {
        "sample_id": "conv-test",
        "conversation": {"speaker_a": "Ana", "speaker_b": "Ben",
                         "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns1,
                         "session_2_date_time": "10:00 am on 2 June, 2023", "session_2": turns2},
        "qa": [
            {"question": "What is the name of Ana's cat?", "evidence": ["D1:1"], "category": 4},
            {"question": "Where did Ben's cello teacher move?", "evidence": ["D2:1; D1:2"],
             "category": 1},
            {"question": "Who said thanks?", "evidence": ["D2:2"], "category": 5},
            {"question": "Unanswerable", "evidence": ["D9:9"], "category": 2},
        ],
    }
    path = tmp_path / "mini-locomo.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path
