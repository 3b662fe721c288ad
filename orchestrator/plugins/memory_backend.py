"""The memory backend base class and the types it speaks: what the core and plugins share.

Plugin authors import these from `orchestrator.plugin_api`; the core imports them from here, so
nothing in the core depends on the plugin surface (which re-exports the CLI helper and the
contract suite, both above the core). Optional capabilities are declared on `MemoryBackend` with
defaults: the facade and the benchmarks call them plainly, never probe with getattr. To add one,
add a method with a default that keeps today's behaviour for backends that do not override it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Iterable,
    Mapping,
    NotRequired,
    Protocol,
    Sequence,
    TypedDict,
    runtime_checkable,
)

if TYPE_CHECKING:
    from orchestrator.plugins.backend_options import BackendOptions


class RetrieveResult(TypedDict):
    """One result per query, the shape the memory contract fixes: the query and its ranked docs with scores."""

    question: str
    docs: list[str]
    doc_scores: list[float]
    # Backends that know supersession (backends/retrieval/supersession.py): each superseded
    # doc as {"doc": its position, "by": the amending doc's position, "date", "by_date"}.
    superseded: NotRequired[list[dict[str, Any]]]


@dataclass(frozen=True)
class MemoryRecord:
    """A doc with optional metadata: event time (unix seconds) and importance 1-5."""

    text: str
    timestamp: float | None = None
    importance: int | None = None


@runtime_checkable
class TextLLM(Protocol):
    """The cheap model tier memory backends may use (summaries, fact extraction)."""

    def complete(self, system: str, prompt: str, max_tokens: int = 1024) -> str:
        """Return the model's text reply to one user prompt."""


def check_texts(texts: object, what: str = "docs") -> list[str]:
    """Return texts as a list, or raise TypeError / ValueError before a backend changes anything.

    A bare string (not a list), a non-string item or a lone surrogate (not storable as UTF-8)
    is refused, so one bad doc never leaves half a batch behind.
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, (list, tuple)):
        raise TypeError(f"{what} must be a list of strings, e.g. [text], not {type(texts).__name__}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{i}] is {type(text).__name__}, not str: pass text only")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{what}[{i}] is not valid Unicode (lone surrogate at index "
                             f"{exc.start}): decode the text properly before indexing") from None
    return list(texts)


@dataclass(frozen=True)
class MemoryDatabase:
    """Where a backend that can keep its store in a database server keeps a project's store
    (`[memory] url`): the server's URL and the project's id. One database serves many projects."""

    url: str
    project: str

    @property
    def shown_url(self) -> str:
        """The URL for messages: its password replaced by *** (as the ticket store shows its own)."""
        from tickets.db import redact

        return redact(self.url)

    @property
    def where(self) -> str:
        """The database and project, for messages."""
        return f"{self.shown_url} (project {self.project!r})"


@dataclass
class ConversationContext:
    """What a conversation-watching backend gives the middle agent instead of the full transcript.

    `summary` is the latest completed summary (None when none is ready yet); `gap_messages` are
    the messages after it, each `{"seq": int, "role": "prompt"|"response", "text": str}`.
    """

    summary: str | None
    gap_messages: list[dict[str, Any]] = field(default_factory=list)


class _DefaultOptions:
    """`MemoryBackend.Options` of a backend that declares none: BackendOptions, imported on use."""

    def __get__(self, obj: object, owner: type | None = None) -> type[BackendOptions]:
        from orchestrator.plugins.backend_options import BackendOptions

        return BackendOptions


# The default fingerprint also hashes the content of a store's small files, so two writes of
# the same size within one tick of the file system's clock (which can leave size, mtime and
# ctime as they were: a coarse clock, e.g. 1-10 ms on many Linux file systems, 1-2 s on FAT
# or HFS+) still move it. Bounded, because it is read on every page of the board: a file up
# to HASHED_FILE_BYTES, and at most HASHED_BYTES in all (the first files by name).
HASHED_FILE_BYTES = 256 * 1024
HASHED_BYTES = 1024 * 1024
# How many characters of a doc's id (the hex SHA-256 of its text) people and the agent are shown.
SHORT_ID_CHARS = 8


def shortest_unique(ident: str, others: Iterable[str]) -> str:
    """The shortest prefix of the id `ident`, SHORT_ID_CHARS (8) characters at least, that no id of
    `others` starts with (as git shortens a commit's hash): two docs' 8-character ids meet about
    once in 100,000 docs, and an id the block shows must name one doc."""
    width = SHORT_ID_CHARS
    for other in others:
        if other != ident:
            same = next((n for n, (a, b) in enumerate(zip(ident, other)) if a != b), len(ident))
            width = max(width, same + 1)
    return ident[:width]


def files_fingerprint(store_dir: Path, names: Sequence[str] = ()) -> str | None:
    """The names, inodes, sizes, modification and change times (ns) of a store's files, and
    the content of the small ones, as one short text (MemoryBackend.fingerprint's default):
    the files whose names start with one of `names`, or, with no names, every file under
    `store_dir`; None when there is none. Still possible: two same-size writes of a file too
    large to hash (or past the budget) within one tick of the file system's clock go unseen
    until the next write that moves its size or times."""
    import hashlib
    import os

    seen = [f"{os.path.relpath(path, store_dir)}:{file_mark(path, info, hashed)}"
            for path, info, hashed in fingerprinted_files(store_dir, names)]
    if not seen:
        return None
    return hashlib.sha256("\n".join(seen).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def fingerprinted_files(store_dir: Path, names: Sequence[str] = ()) -> list[tuple[str, Any, bool]]:
    """The files files_fingerprint reads, in order: (path, its stat, whether its content is
    hashed: a file up to HASHED_FILE_BYTES while HASHED_BYTES in all last)."""
    import os

    found: list[tuple[str, Any, bool]] = []
    budget = HASHED_BYTES
    for root, dirs, files in os.walk(store_dir):
        dirs.sort()
        for name in sorted(files):
            if names and not any(name.startswith(n) for n in names):
                continue
            path = os.path.join(root, name)
            try:
                info = os.stat(path)
            except OSError:  # removed while it was looked at: the next look sees the change
                continue
            # not SQLite's -shm: a memory-mapped index whose read marks every reader rewrites
            hashed = info.st_size <= min(HASHED_FILE_BYTES, budget) and not name.endswith("-shm")
            if hashed:
                budget -= info.st_size
            found.append((path, info, hashed))
        if names:
            break  # a backend's named files are in the directory itself
    return found


def file_mark(path: str, info: Any, hashed: bool) -> str:
    """One file's part of files_fingerprint: its inode (a file replaced whole by os.replace
    is new), size, modification and change times in ns (a write moves both; the change time
    also moves when a tool sets the modification time back), and, when `hashed`, a digest of
    its content (two writes within one clock tick leave all of those as they were)."""
    import hashlib

    mark = f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
    if not hashed:
        return mark
    try:
        with open(path, "rb") as handle:
            digest = hashlib.blake2b(handle.read(HASHED_FILE_BYTES + 1), digest_size=16).hexdigest()
    except OSError:  # removed or locked away while it was looked at: the stat still counts
        return mark
    return f"{mark}:{digest}"


class MemoryBackend(ABC):
    """A project memory store. One instance serves one project directory.

    The facade (orchestrator/memory/facade.py) creates it with the project's own directory, the
    validated options and an optional TextLLM (None means: work offline, deterministically).
    It serialises calls per project with a thread lock and a file lock, so a backend needs no
    locking of its own for index/retrieve/delete (background work it starts is its own), but it
    must re-read its state at the start of each call: another process (a second `middle run`,
    `middle memory add`) may have changed the store since (see docs/plugins.md, Other processes).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # The backend's options model, a BackendOptions subclass; a backend without options keeps
    # BackendOptions itself (looked up when first used, so defining a backend imports no pydantic).
    Options: ClassVar[type[BackendOptions]] = _DefaultOptions()  # type: ignore[assignment]
    # How `retrieve` ranks, shown by `middle backends` and `middle memory search`: "relevance"
    # (scores say how well a doc matches the query) or "recency" (newest first, query ignored).
    recall: ClassVar[str] = "relevance"
    # What the backend reads as "now" (unix seconds) for the times it stores and the recency it
    # ranks by. `middle bench tickets` replays a history on the history's own clock.
    clock: Callable[[], float] = staticmethod(time.time)
    # The files in a project's directory that make up this backend's store (e.g.
    # ("hybrid.sqlite3",)); empty: unknown, so the directory itself counts. See store_exists.
    store_files: ClassVar[tuple[str, ...]] = ()
    # True: the backend can keep a project's store in a database server. With `[memory] url`
    # the facade then passes `database=MemoryDatabase(url, project)` to `__init__` and to
    # `store_exists`, and the project's calls take turns across machines through the
    # database's advisory lock instead of a file lock (see docs/plugins.md).
    shares_database: ClassVar[bool] = False
    # True: `index_records` keeps each record's `timestamp` as the doc's event time (recency
    # counts from it), so a reindex and `middle bench memory` pass times instead of prefixing
    # dates to the text. False: the default `index_records` drops them.
    keeps_times: ClassVar[bool] = False

    @classmethod
    def store_exists(cls, store_dir: Path) -> bool:
        """Whether store_dir holds this backend's store. Read-only calls (`middle memory
        list|search|export`, the memory API's retrieve, docs and search) on a project without
        one answer empty and create nothing."""
        store_dir = Path(store_dir)
        if cls.store_files:
            return any((store_dir / name).exists() for name in cls.store_files)
        return store_dir.is_dir()

    def __init__(self, store_dir: Path, options: BackendOptions, llm: TextLLM | None = None):
        self.store_dir = Path(store_dir)
        self.options = options
        self.llm = llm

    @abstractmethod
    def index(self, docs: list[str]) -> None:
        """Add docs to the store (a doc already present is not added twice)."""

    @abstractmethod
    def retrieve(self, queries: list[str], num_to_retrieve: int) -> list[RetrieveResult]:
        """Return one RetrieveResult per query, at most num_to_retrieve docs each, best first."""

    @abstractmethod
    def delete(self, docs: list[str]) -> int:
        """Remove docs given by their exact text; return how many were removed."""

    def list_docs(self) -> list[str]:
        """Every doc in the store, oldest first (used by `middle memory list|export`)."""
        raise NotImplementedError(f"backend {self.name!r} cannot list its docs")

    # Optional capabilities: the defaults below are what the facade did for a backend without
    # them. Override the ones your store can do better (see docs/plugins.md).
    def has_doc(self, doc: str) -> bool:
        """Whether the store holds exactly `doc` (`middle memory add`, finding a doc across
        stores); the default reads list_docs, and answers False when the backend cannot list."""
        try:
            return doc in self.list_docs()
        except NotImplementedError:
            return False

    def docs_by_id(self, prefix: str) -> list[str]:
        """The docs whose id (the hex SHA-256 of the text) starts with `prefix` (4 or more
        lowercase hex characters): `middle memory show|pin|edit|delete ID` finds a doc by it.
        The default reads list_docs (the whole store); a store that keys docs by that hash
        answers from its index instead (a store of 100,000 docs in milliseconds)."""
        import hashlib

        return [d for d in self.list_docs()
                if hashlib.sha256(d.encode("utf-8", "surrogatepass")).hexdigest().startswith(prefix)]

    def docs_by_ids(self, prefixes: list[str]) -> list[str]:
        """The docs whose id starts with any of `prefixes` (as docs_by_id), each once: the
        "Memories invoked" block finds the ids of all the docs it shows in one call. The
        default resolves them in one call where it can: with the default docs_by_id (which
        reads list_docs for each prefix), one pass over list_docs; with the backend's own
        docs_by_id and list_ids, one call of list_ids, then docs_by_id only for the ids that
        match (the docs shown, and any that share their start); with docs_by_id alone, a
        call per prefix. A store that keys docs by their hash answers in one query instead
        (override it)."""
        import hashlib

        wanted = tuple(dict.fromkeys(prefixes))
        if not wanted:
            return []
        if type(self).docs_by_id is MemoryBackend.docs_by_id:
            return list(dict.fromkeys(
                d for d in self.list_docs()
                if hashlib.sha256(d.encode("utf-8", "surrogatepass")).hexdigest().startswith(wanted)))
        ids = self.list_ids()
        if ids is not None:
            hits = dict.fromkeys(i for i in ids if isinstance(i, str) and i.startswith(wanted))
            return list(dict.fromkeys(d for ident in hits for d in self.docs_by_id(ident)))
        return list(dict.fromkeys(d for prefix in wanted for d in self.docs_by_id(prefix)))

    def list_ids(self) -> Sequence[str] | None:
        """Every doc's id (the hex SHA-256 of its text) in one call, when the store can give
        them without its texts (e.g. from a key column or file names), or None (the default:
        it cannot). With it, the block's ids are resolved in one call (docs_by_ids' default)
        and told apart where two docs share their first 8 characters (MemoryFacade.short_ids)."""
        return None

    def doc_time(self, doc: str) -> float | None:
        """The time the store dates exactly `doc` by (unix seconds; see keeps_times), or None
        (not there, or no time kept): an edit and its undo keep a doc's time. The default
        reads list_records (the whole store); a store that keys docs by their hash looks
        the one doc up instead."""
        return next((when for text, when in self.list_records() if text == doc), None)

    def fingerprint(self) -> str | None:
        """A short text that changes whenever a doc is added to or removed from the store, by
        anyone: the server's catalog (the board's Memory page, the docs API) lists the store
        again when it changed though no write through middle noted a doc (a plugin's own
        tool, or another program, writing the store). Read on every page, so keep it cheap
        (a count and the newest row id, not a listing), and about the docs alone: a value that
        moves on a recall (an access count) lists the store after every recall. The built-in
        stores add a count of the writes of their docs' text and time, kept by triggers, so a
        doc rewritten in place is seen too. The default: the names, inodes, sizes, modification
        and change times of the store's files and the content of the small ones (see
        files_fingerprint: `store_files` and the files beside them that start with those names,
        e.g. SQLite's `-wal`; every file in the directory without `store_files`); None, when
        there are none (a store in a database): such writes then show once the catalog lists
        the store for another reason."""
        return files_fingerprint(self.store_dir, self.store_files)

    def list_records(self) -> Sequence[tuple[str, float | None]]:
        """Every doc with its event time, oldest first (`middle memory reindex` keeps times);
        the default pairs list_docs with no time."""
        return [(text, None) for text in self.list_docs()]

    @classmethod
    def salvage_records(cls, store_dir: Path) -> Sequence[tuple[str, float | None]]:
        """The docs (with their times) that can still be read from the project's store when it
        is too damaged to open, for `middle memory reindex --from` this backend to rebuild it
        from; leave the damaged files as they are. The default can read none (NotImplementedError:
        reindex then says to restore the store from a backup)."""
        raise NotImplementedError(f"backend {cls.name!r} cannot read docs from a damaged store")

    def index_records(self, records: Sequence[MemoryRecord]) -> None:
        """Add docs with their event times (see keeps_times); the default indexes the texts."""
        self.index([record.text for record in records])

    def explain(self, query: str, docs: Sequence[str]) -> list[dict[str, Any]]:
        """Why each of `docs` (what retrieve returned for `query`) was recalled, in the
        backend's own terms: a dict per doc with any of "similarity" (cosine, float), "graph"
        (the entity names linking query and doc), "facts" (matched facts, as text), "date" (the
        doc's time, unix seconds), "recency", "burst", "issue",
        "thread_words" and "rerank" (words). The core
        adds the shared keywords, pins and supersede links; the default adds nothing."""
        return [{} for _ in docs]

    def catch_up(self) -> None:
        """Bring what the backend derives from its docs (an index, a graph, a summary) up to
        the docs another process or another program wrote since this instance last looked:
        the facade calls it under the project's locks before every call of a project, so a
        process that holds the store open (`middle run` between turns) recalls what a person
        changed elsewhere without `middle memory reindex`. Catch up only what changed (the
        built-in stores log the key of each doc row any program writes, by triggers, and drop
        their own writes' entries: backends.rederive.CatchesUp), and keep it cheap when nothing
        did (one indexed read). The default does nothing: a backend that derives nothing, or
        re-reads its whole store under each call, has nothing to catch up on. The contract
        suite's `test_an_open_instance_catches_up_on_what_another_program_wrote` checks it with
        your `outside_writer` fixture."""

    def apply_curation(self, notes: Mapping[str, str]) -> None:
        """What people said of the docs (doc text -> "superseded by [id]", "expired" or
        "pinned"; a doc not named has nothing said of it), given before a retrieve whenever it
        changed. A backend whose results hold text derived from many docs (sliding_window's
        summaries) rebuilds or marks that text, so a fix reaches the next ticket; the facade
        applies the same notes to the docs it returns whole. The default does nothing."""

    def derived_texts(self) -> list[tuple[str, str]]:
        """Texts `retrieve` can return that are not docs (a summary of many docs), each with
        a line saying what it is made from, so `middle memory show` finds every id the
        memories block shows; default none."""
        return []

    def embed_ahead(self, docs: Sequence[str]) -> Mapping[str, Any]:
        """The slow part of indexing `docs` (their vectors), per doc, for `index_embedded`. The
        facade calls it without the project's locks, so one large index call does not make
        every other memory call of the project wait while it embeds: it may run beside other
        calls on this instance, and must not read or write the store. Default: nothing ({})."""
        return {}

    def index_embedded(self, docs: list[str], embedded: Mapping[str, Any]) -> None:
        """`index(docs)` with what `embed_ahead` gave for them (a doc missing from `embedded`
        is embedded here, under the locks); the default is `index(docs)`."""
        self.index(docs)

    def embeds_docs(self) -> bool:
        """Whether indexing embeds docs, so `warm_embeddings` has work to do (`middle bench`
        then times an embed phase apart from the store); default False."""
        return False

    def warm_embeddings(self, docs: Sequence[str]) -> None:
        """Embed docs into a cache without storing them (benchmarks time the two apart);
        the default does nothing."""

    # Optional: backends that watch the ticket conversation (sliding_window) override these.
    def observe_round(self, conversation_id: str, prompt: str, response: str) -> None:
        """Record one prompt/response round of a ticket conversation; default ignores it."""

    def conversation_context(self, conversation_id: str) -> ConversationContext | None:
        """Summary plus gap messages for the conversation; None means show the full transcript."""
        return None

    def agent_context(self) -> str:
        """Curated project knowledge (e.g. mental models) the middle agent reads ahead of the
        recalled memories at ticket start and every turn; '' (the default) for none. Keep it
        bounded: it is sent on every middle-agent request."""
        return ""

    def flush(self, timeout: float | None = None) -> None:
        """Wait for background work (summaries) to finish; default has none."""

    def close(self) -> None:
        """Release files and threads; the facade calls it once when done with the project."""
