"""The `keyword` backend: docs in one JSON file, ranked by keyword overlap with the query."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from pathlib import Path

from pydantic import Field

from orchestrator.errors import MemoryStoreError
from orchestrator.plugin_api import BackendOptions, MemoryBackend, RetrieveResult, TextLLM

FILE_NAME = "keyword_memory.json"
_WORD = re.compile(r"\w+")
# Words too common to say anything about what a doc is about.
STOPWORDS = frozenset(
    "a an and are as at be by for from has in is it of on or that the this to was were with".split()
)


def keywords(text: str) -> set[str]:
    """Distinct lower-cased words of text, stopwords left out (Unicode-aware)."""
    return {w for w in (m.casefold() for m in _WORD.findall(text)) if w not in STOPWORDS}


class KeywordOptions(BackendOptions):
    """`[memory.options]` of the keyword backend; unknown keys are an error."""

    min_overlap: int = Field(1, ge=1, description="shared keywords a doc needs to be returned")


class KeywordBackend(MemoryBackend):
    """Keeps docs in `<store_dir>/keyword_memory.json`; ranks by shared keywords (Dice score)."""

    name = "keyword"
    description = "Docs in a JSON file, ranked by keyword overlap with the query."
    Options = KeywordOptions

    def __init__(self, store_dir: Path, options: BackendOptions | None = None,
                 llm: TextLLM | None = None):
        super().__init__(store_dir, options or KeywordOptions(), llm)
        self.path = (self.store_dir / FILE_NAME).resolve()
        self._lock = threading.Lock()  # retrieves may come from several threads at once
        self._docs: list[str] = self._load()

    def _load(self) -> list[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise MemoryStoreError(
                f"Cannot read keyword memory at {self.path}: {exc}. "
                "Restore it from a backup or move it away to start with an empty memory."
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("docs"), list):
            raise MemoryStoreError(f"{self.path} is not a keyword memory file (no 'docs' list).")
        return [str(d) for d in data["docs"]]

    def _save(self) -> None:
        """Write atomically: a crash mid-write leaves the previous file readable."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".keyword-", suffix=".tmp", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({"version": 1, "docs": self._docs}, fh, ensure_ascii=False)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # make the rename itself durable
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise MemoryStoreError(f"Cannot write keyword memory at {self.path}: {exc}.") from exc

    def index(self, docs: list[str]) -> None:
        with self._lock:
            known = set(self._docs)
            new = [d for d in dict.fromkeys(docs) if d not in known]
            if new:
                self._docs.extend(new)
                self._save()

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        """Best first by Dice overlap of keyword sets; an exact copy of the query scores 1.0."""
        with self._lock:
            docs = list(self._docs)
        need = self.options.min_overlap
        results: list[RetrieveResult] = []
        for query in queries:
            qwords = keywords(query)
            ranked = []
            for position, doc in enumerate(docs):
                dwords = keywords(doc)
                shared = len(qwords & dwords)
                if doc == query:
                    score = 1.0
                elif shared >= need:
                    score = 2 * shared / (len(qwords) + len(dwords))
                else:
                    continue
                ranked.append((-score, -position, doc))  # ties: the newer doc first
            top = sorted(ranked)[: max(0, num_to_retrieve)]
            results.append({"question": query, "docs": [d for _, _, d in top],
                            "doc_scores": [-s for s, _, _ in top]})
        return results

    def delete(self, docs: list[str]) -> int:
        with self._lock:
            gone = set(docs)
            kept = [d for d in self._docs if d not in gone]
            removed = len(self._docs) - len(kept)
            if removed:
                self._docs = kept
                self._save()
        return removed

    def list_docs(self) -> list[str]:
        with self._lock:
            return list(self._docs)
