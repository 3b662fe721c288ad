"""OpenIE sources: the memory LLM (schema-checked JSON), precomputed results, the offline extractor."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from backends.retrieval.cache import open_cache_db
from orchestrator.plugin_api import ConfigError, TextLLM

from .extract import Extraction, extract_offline

M = TypeVar("M", bound=BaseModel)

log = logging.getLogger("middle.memory.hipporag")

NER_SYSTEM = (
    "You extract named entities from a passage for a knowledge graph: people, organisations, "
    "places, works, products, files, modules, commands, dates and numbers that matter. Reply "
    'with JSON only: {"named_entities": ["...", ...]}.')
TRIPLE_SYSTEM = (
    "You build a knowledge graph from a passage. Given the passage and its named entities, "
    "write (subject, predicate, object) triples stating the passage's facts; each triple should "
    "name at least one of the entities, and pronouns must be resolved to names. Reply with JSON "
    'only: {"triples": [["subject", "predicate", "object"], ...]}.')
FILTER_SYSTEM = (
    "You are the recognition memory of a retrieval system. Given a query and candidate facts, "
    "keep only the facts that help answer the query, in the given order, copied exactly. Reply "
    'with JSON only: {"facts": [["subject", "predicate", "object"], ...]} (possibly empty).')


class _NerReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    named_entities: list[str]


class _TripleReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    triples: list[list[str]]


class _FilterReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[list[str]]


class NotJSON(ValueError):
    """An LLM reply that is not the JSON object asked for."""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def parse_reply(text: Any, schema: type[M]) -> M:
    """The JSON object in a reply, validated against schema (code fences tolerated; never eval)."""
    if not isinstance(text, str):
        raise NotJSON(f"reply is {type(text).__name__}, not text")
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise NotJSON(f"no JSON object in reply {text[:80]!r}")
    try:
        return schema.model_validate(json.loads(body[start:end + 1]))
    except (json.JSONDecodeError, ValidationError, RecursionError) as exc:
        raise NotJSON(f"reply is not the expected JSON: {str(exc)[:200]}") from None


def llm_extract(llm: TextLLM, passage: str, max_chars: int) -> Extraction:
    """Two calls as in HippoRAG: named entities, then triples conditioned on them."""
    text = passage[:max_chars]
    ner = parse_reply(llm.complete(NER_SYSTEM, f"Passage:\n{text}", 1024), _NerReply)
    prompt = (f"Passage:\n{text}\n\nNamed entities: "
              f"{json.dumps(ner.named_entities, ensure_ascii=False)}")
    triples = parse_reply(llm.complete(TRIPLE_SYSTEM, prompt, 2048), _TripleReply)
    return Extraction.build(ner.named_entities, triples.triples, "llm")


PROMPT_VERSION = hashlib.sha256((NER_SYSTEM + TRIPLE_SYSTEM).encode()).hexdigest()[:12]


class OpenIECache:
    """LLM OpenIE results by (model, prompt version, passage hash) in one SQLite file beside the
    embedding cache: a failed or repeated index never pays for the same extraction twice.
    Best effort: a cache that cannot be read or written is logged and skipped."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_cache_db(self.path, "OpenIE", [
            "CREATE TABLE IF NOT EXISTS openie (key TEXT PRIMARY KEY, result TEXT NOT NULL)"])

    @staticmethod
    def key(llm: TextLLM, passage: str) -> str:
        model = str(getattr(llm, "model", "") or type(llm).__name__)
        digest = hashlib.sha256(passage.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{model}|{PROMPT_VERSION}|{digest}"

    def get(self, key: str) -> Extraction | None:
        if self._conn is None:
            return None
        try:
            with self._lock:
                row = self._conn.execute("SELECT result FROM openie WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            log.warning("OpenIE cache %s read failed (%s)", self.path, exc)
            return None
        return cached_extraction(row[0]) if row else None

    def put(self, key: str, extraction: Extraction) -> None:
        if self._conn is None:
            return
        try:
            with self._lock:
                self._conn.execute("INSERT OR REPLACE INTO openie VALUES (?, ?)",
                                   (key, cache_record(extraction)))
        except sqlite3.Error as exc:
            log.warning("OpenIE cache %s write failed (%s)", self.path, exc)


_caches: dict[str, OpenIECache] = {}


def shared_openie_cache(directory: Path) -> OpenIECache:
    """One cache object per file per process."""
    path = (Path(directory) / "openie.sqlite3").resolve()
    with _loaded_lock:
        if str(path) not in _caches:
            _caches[str(path)] = OpenIECache(path)
        return _caches[str(path)]


def cached_extraction(raw: str) -> Extraction | None:
    """An LLM result stored in the OpenIE cache (untrusted: re-validated, None when bad)."""
    try:
        data = json.loads(raw)
        ents, triples = data["entities"], data["triples"]
        if not isinstance(ents, list) or not isinstance(triples, list):
            return None
        return Extraction.build(ents, triples, "llm")
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def cache_record(extraction: Extraction) -> str:
    return json.dumps({"entities": extraction.entities,
                       "triples": [list(t) for t in extraction.triples]}, ensure_ascii=False)


def llm_filter(llm: TextLLM, query: str, facts: list[tuple[str, str, str]]) -> list[int]:
    """Positions of the facts the LLM keeps; every fact when its reply is unusable."""
    prompt = (f"Query: {query}\n\nCandidate facts: "
              f"{json.dumps([list(f) for f in facts], ensure_ascii=False)}")
    try:
        reply = parse_reply(llm.complete(FILTER_SYSTEM, prompt, 1024), _FilterReply)
    except NotJSON as exc:
        log.warning("Recognition filter reply unusable (%s); keeping all %d facts", exc, len(facts))
        return list(range(len(facts)))
    kept = {tuple(f) for f in reply.facts}
    return [i for i, fact in enumerate(facts) if fact in kept]


# --- precomputed OpenIE files ---------------------------------------------------------------

class Precomputed:
    """OpenIE results by exact passage text, from a file shaped like openie_triples.json."""

    def __init__(self, path: Path):
        self.path = path
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"openie = 'precomputed:{path}': the file does not exist") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"openie precomputed file {path} is not readable JSON: {exc}") from None
        docs = data.get("docs") if isinstance(data, dict) else None
        if not isinstance(docs, list):
            raise ConfigError(f"openie precomputed file {path} has no 'docs' list "
                              "(expected {docs: [{passage, extracted_entities, extracted_triples}]})")
        self.by_text: dict[str, Extraction] = {}
        self.skipped_triples = 0
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            passage = doc.get("passage")
            if not isinstance(passage, str) and isinstance(doc.get("title"), str) \
                    and isinstance(doc.get("text"), str):
                passage = f"{doc['title']}\n{doc['text']}"
            if not isinstance(passage, str):
                continue
            ents = doc.get("extracted_entities")
            triples = doc.get("extracted_triples")
            extraction = Extraction.build(ents if isinstance(ents, list) else [],
                                          triples if isinstance(triples, list) else [],
                                          "precomputed")
            self.skipped_triples += extraction.skipped_triples
            self.by_text[passage] = extraction
        log.info("Loaded OpenIE for %d passages from %s; skipped %d malformed triples",
                 len(self.by_text), path, self.skipped_triples)

    def get(self, passage: str) -> Extraction | None:
        return self.by_text.get(passage)


_loaded: dict[tuple[str, int, int], Precomputed] = {}
_loaded_lock = threading.Lock()


def load_precomputed(spec: str) -> Precomputed:
    """One parsed file per (path, size, mtime) per process: benchmarks open many stores."""
    path = Path(os.path.expanduser(spec.partition(":")[2].strip())).resolve()
    try:
        stat = path.stat()
    except OSError:
        raise ConfigError(f"openie = {spec!r}: {path} does not exist") from None
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _loaded_lock:
        if key not in _loaded:
            _loaded[key] = Precomputed(path)
        return _loaded[key]


def extract(passage: str, source: str, llm: TextLLM | None, precomputed: Precomputed | None,
            max_chars: int, cache: OpenIECache | None = None) -> Extraction:
    """One passage's OpenIE from the configured source; offline when the source cannot answer."""
    if source == "precomputed" and precomputed is not None:
        found = precomputed.get(passage)
        if found is not None:
            return found
        return extract_offline(passage)
    if source == "llm" and llm is not None:
        key = OpenIECache.key(llm, passage[:max_chars])
        if cache is not None and (hit := cache.get(key)) is not None:
            return hit
        try:
            result = llm_extract(llm, passage, max_chars)
            if cache is not None:
                cache.put(key, result)
            return result
        except NotJSON as exc:
            log.warning("OpenIE reply unusable for one passage (%s); using the offline extractor "
                        "for it", exc)
        except Exception as exc:  # noqa: BLE001 - a model outage must not lose the memory
            log.warning("OpenIE call failed for one passage (%s: %s); using the offline extractor "
                        "for it", type(exc).__name__, exc)
        return extract_offline(passage)
    return extract_offline(passage)
