"""The `keyword` backend: docs in one JSON file, ranked by keyword overlap with the query.

Several instances (in several processes) may serve one store directory: the facade runs them
one call at a time under its file lock, but each instance lives on between calls. So every call
starts by re-reading the file if anyone may have changed it since this instance last read it,
and every change is computed on a fresh copy and written atomically before it is kept.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from pathlib import Path

from pydantic import Field

from orchestrator.plugin_api import (
    BackendOptions,
    MemoryBackend,
    MemoryStoreError,
    RetrieveResult,
    TextLLM,
    check_texts,
)

FILE_NAME = "keyword_memory.json"
TEMP_PREFIX, TEMP_SUFFIX = ".keyword-", ".tmp"
# A file whose mtime is this close to now may be rewritten within the same mtime tick without
# its stat changing (same size, inode reused), so its stat is not trusted as a version (git's
# "racy clean" rule). 2 s covers the coarsest common clocks (FAT); most are far finer.
RACY_NS = 2_000_000_000
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
    options: KeywordOptions  # the facade validates [memory.options] with Options

    def __init__(self, store_dir: Path, options: KeywordOptions | None = None,
                 llm: TextLLM | None = None):
        super().__init__(store_dir, options or KeywordOptions(), llm)
        self.path = (self.store_dir / FILE_NAME).resolve()
        self._lock = threading.Lock()  # retrieves may come from several threads at once
        self._docs: list[str] = []
        self._version: tuple[int, ...] | None = None  # stat of the file self._docs came from
        self._remove_leftover_temp_files()
        with self._lock:
            self._refresh()  # a corrupt file is reported when the store is opened

    # --- the file ------------------------------------------------------------------------

    def _remove_leftover_temp_files(self) -> None:
        # The facade opens a backend under the project's file lock, when no write can be in
        # progress, so a temp file here is what a killed write left behind.
        for tmp in self.path.parent.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
            try:
                tmp.unlink()
            except OSError:
                pass  # harmless: temp files are never read

    def _refresh(self) -> list[str]:
        """The current docs: re-read the file unless its stat proves it unchanged."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._docs, self._version = [], None
            return self._docs
        except OSError as exc:
            raise MemoryStoreError(f"Cannot read keyword memory at {self.path}: {exc}.") from exc
        version = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if version == self._version:
            return self._docs
        docs = self._load()
        settled = time.time_ns() - st.st_mtime_ns > RACY_NS
        # Stat taken before the read: if the file changed in between, the next stat differs.
        self._docs, self._version = docs, (version if settled else None)
        return docs

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
        docs = data.get("docs") if isinstance(data, dict) else None
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            raise MemoryStoreError(
                f"{self.path} is not a keyword memory file (no 'docs' list of strings). "
                "Restore it from a backup or move it away to start with an empty memory."
            )
        return docs

    def _save(self, docs: list[str]) -> None:
        """Write atomically, then keep docs: a failed write changes neither file nor memory."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX,
                                       dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({"version": 1, "docs": docs}, fh, ensure_ascii=False)
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
            self._version = None  # whatever happened on disk, read it again next call
            raise MemoryStoreError(f"Cannot write keyword memory at {self.path}: {exc}.") from exc
        self._docs, self._version = docs, None  # just written: racy, so re-read next call

    # --- the memory API --------------------------------------------------------------------

    def index(self, docs: list[str]) -> None:
        docs = check_texts(docs, "docs")
        with self._lock:
            current = self._refresh()
            known = set(current)
            new = [d for d in dict.fromkeys(docs) if d not in known]
            if new:
                self._save(current + new)

    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        """Best first by Dice overlap of keyword sets; an exact copy of the query scores 1.0."""
        queries = check_texts(queries, "queries")
        with self._lock:
            docs = list(self._refresh())
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
        gone = set(check_texts(docs, "docs"))
        with self._lock:
            current = self._refresh()
            kept = [d for d in current if d not in gone]
            removed = len(current) - len(kept)
            if removed:
                self._save(kept)
        return removed

    def list_docs(self) -> list[str]:
        with self._lock:
            return list(self._refresh())
