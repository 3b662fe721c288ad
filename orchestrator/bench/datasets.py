"""Benchmark datasets: MuSiQue-shaped retrieval, LoCoMo-shaped conversations, synthetic scale stores."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"  # where the project keeps its samples

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                     5: "adversarial"}


def default_path(relative: str) -> Path | None:
    """`../shared/data/<relative>` beside the repo, when it exists."""
    path = SHARED_DATA / relative
    return path if path.exists() else None


def _load_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"dataset file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"dataset file {path} is not readable JSON: {exc}") from None


def _need(item: Any, key: str, path: Path, where: str, kind: type | tuple = object) -> Any:
    """item[key], or a ConfigError naming the file, the place and the missing key."""
    if not isinstance(item, dict) or key not in item:
        raise ConfigError(f"dataset file {path}: {where} has no {key!r} key "
                          f"(expected the shape described in shared/data/README.md)")
    value = item[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ConfigError(f"dataset file {path}: {where}[{key!r}] should be {names}, "
                          f"not {type(value).__name__}")
    return value


def _list(data: Any, path: Path, what: str) -> list:
    if not isinstance(data, list) or not data:
        raise ConfigError(f"dataset file {path} should hold a non-empty JSON list of {what}")
    return data


# --- MuSiQue-shaped: questions.json + corpus.json ------------------------------------------

@dataclass
class RetrievalQuestion:
    question: str
    gold: set[str]  # gold passages as indexed: f"{title}\n{text}"


@dataclass
class RetrievalDataset:
    name: str
    passages: list[str]
    questions: list[RetrievalQuestion]


def passage_text(title: str, text: str) -> str:
    """The convention of shared/data/README.md: a passage is indexed as title, newline, text."""
    return f"{title}\n{text}"


def load_retrieval(directory: Path) -> RetrievalDataset:
    directory = Path(directory)
    qpath, cpath = directory / "questions.json", directory / "corpus.json"
    passages: list[str] = []
    for i, item in enumerate(_list(_load_json(cpath), cpath, "passages {title, text}")):
        passages.append(passage_text(_need(item, "title", cpath, f"passage {i}", str),
                                     _need(item, "text", cpath, f"passage {i}", str)))
    questions: list[RetrievalQuestion] = []
    for i, item in enumerate(_list(_load_json(qpath), qpath, "questions")):
        where = f"question {i}"
        gold = {
            passage_text(_need(p, "title", qpath, f"{where} paragraph {j}", str),
                         _need(p, "paragraph_text", qpath, f"{where} paragraph {j}", str))
            for j, p in enumerate(_need(item, "paragraphs", qpath, where, list))
            if _need(p, "is_supporting", qpath, f"{where} paragraph {j}", bool)
        }
        if gold:
            questions.append(RetrievalQuestion(_need(item, "question", qpath, where, str), gold))
    missing = {g for q in questions for g in q.gold} - set(passages)
    if missing:
        raise ConfigError(f"dataset {directory}: {len(missing)} supporting paragraphs of "
                          f"{qpath.name} are not in {cpath.name}, e.g. {next(iter(missing))[:80]!r}")
    return RetrievalDataset(directory.name, list(dict.fromkeys(passages)), questions)


# --- LoCoMo-shaped conversations ------------------------------------------------------------

@dataclass
class Turn:
    dia_id: str
    text: str  # "Speaker: words [shares caption]"
    date: str  # the session's date-time as written in the data
    timestamp: float | None


@dataclass
class MemoryQuestion:
    question: str
    evidence: set[str]  # dia_ids
    category: str


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[MemoryQuestion] = field(default_factory=list)
    skipped_questions: int = 0  # no evidence that names a turn of this conversation


_DIA_ID = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_(\d+)$")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%d %B %Y")


def parse_date(text: str) -> float | None:
    """LoCoMo's '1:56 pm on 8 May, 2023' as unix seconds (UTC), or None when unparseable."""
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def load_memory(path: Path) -> list[Conversation]:
    path = Path(path)
    conversations = []
    for i, sample in enumerate(_list(_load_json(path), path, "conversations")):
        where = f"conversation {i}"
        conv = _need(sample, "conversation", path, where, dict)
        out = Conversation(str(sample.get("sample_id", i)))
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.match(key)))
        if not sessions:
            raise ConfigError(f"dataset file {path}: {where} has no 'session_N' keys")
        for _n, key in sessions:
            date = str(conv.get(f"{key}_date_time", ""))
            for j, turn in enumerate(_need(conv, key, path, where, list)):
                twhere = f"{where} {key} turn {j}"
                speaker = _need(turn, "speaker", path, twhere, str)
                text = f"{speaker}: {_need(turn, 'text', path, twhere, str)}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                out.turns.append(Turn(_need(turn, "dia_id", path, twhere, str), text, date,
                                      parse_date(date)))
        known = {t.dia_id for t in out.turns}
        for j, qa in enumerate(_need(sample, "qa", path, where, list)):
            qwhere = f"{where} qa {j}"
            raw = _need(qa, "evidence", path, qwhere, list)
            evidence = {d for e in raw for d in _DIA_ID.findall(str(e))} & known
            category = _need(qa, "category", path, qwhere, int)
            if not evidence:
                out.skipped_questions += 1
                continue
            out.questions.append(MemoryQuestion(_need(qa, "question", path, qwhere, str), evidence,
                                                LOCOMO_CATEGORIES.get(category, str(category))))
        conversations.append(out)
    return conversations


# --- synthetic stores for `bench scale` -----------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def synthetic_docs(passages: list[str], count: int, seed: int = 7) -> list[str]:
    """`count` distinct memory-sized docs (one to three sentences) made of real passages: a
    passage's title, a run of its sentences, and often a sentence borrowed from another."""
    rng = random.Random(seed)
    split = []
    for passage in passages:
        title, _, body = passage.partition("\n")
        sentences = [s for s in _SENTENCE.split(body.strip()) if s]
        if sentences:
            split.append((title, sentences))
    if not split:
        raise ConfigError("synthetic docs need passages with text")
    docs: dict[str, None] = {}
    attempts = 0
    while len(docs) < count:
        attempts += 1
        if attempts > count * 50:
            raise ConfigError(f"could only make {len(docs)} distinct docs from {len(split)} passages")
        title, sentences = rng.choice(split)
        start = rng.randrange(len(sentences))
        run = sentences[start:start + rng.randint(1, 2)]
        if rng.random() < 0.7:
            run.append(rng.choice(rng.choice(split)[1]))
        docs.setdefault(f"{title}: {' '.join(run)}", None)
    return list(docs)
