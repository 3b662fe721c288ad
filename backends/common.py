"""What the built-in backends share beyond their store: strict options, the embedder a store is bound
to, and a cache of recent query vectors."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import ValidationError

from backends.storage import Store, hash_range
from orchestrator.plugin_api import BackendOptions, ConfigError, MemoryDatabase, MemoryStoreError

RECENT_QUERIES = 64


def coerce_options(cls: Any, options: BackendOptions | dict[str, Any] | None) -> BackendOptions:
    """options as the backend's strict Options model; unknown keys and bad values are a
    ConfigError naming the backend."""
    if isinstance(options, cls.Options):
        return options
    raw = options.model_dump() if isinstance(options, BackendOptions) else dict(options or {})
    try:
        return cls.Options.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid [memory.options] for backend {cls.name!r}: {exc}") from None


def claim_backend(store: Any, name: str) -> None:
    """Record which backend a store belongs to; refuse a store another backend wrote."""
    held = store.claim_meta({"backend": name})["backend"]
    if held != name:
        raise MemoryStoreError(f"{store.path} belongs to backend {held!r}, not {name!r}: move it "
                               "away or use that backend")


def bind_embedder(store: Any, options: Any, backend: str, docs_table: str) -> Any:
    """The embedder of a store: `embedder = "auto"` means the one the store recorded (else the
    default: MiniLM when installed, else hashing); an empty store takes whichever is asked for;
    a store with docs refuses another (its vectors live in another space) and says how to
    switch: `middle memory reindex --from BACKEND` rebuilds it with the one now asked for."""
    from backends.retrieval.embedders import default_embedder_name, make_embedder

    with store.read() as conn:
        recorded = store.meta_json(conn, "embedder_spec", None)
    if recorded is not None and not (isinstance(recorded, dict)
                                     and isinstance(recorded.get("embedder"), str)):
        raise MemoryStoreError(f"the {store.kind} {store.path} is corrupt (its recorded embedder "
                               f"is {recorded!r}, not an embedder spec); move it away or reindex")
    if options.embedder == "auto" and recorded:
        _refuse_recorded_endpoint(store, recorded, options)
        embedder = make_embedder(
            recorded["embedder"], url=recorded.get("embedder_url"),
            api_key_env=recorded.get("embedder_api_key_env"),
            query_prefix=recorded.get("query_prefix", ""),
            document_prefix=recorded.get("document_prefix", ""))
        url, key_env = recorded.get("embedder_url"), recorded.get("embedder_api_key_env")
    else:
        name = default_embedder_name() if options.embedder == "auto" else options.embedder
        embedder = make_embedder(
            name, url=options.embedder_url, api_key_env=options.embedder_api_key_env,
            query_prefix=options.query_prefix, document_prefix=options.document_prefix)
        url, key_env = options.embedder_url, options.embedder_api_key_env
    spec = {**embedder.spec(), "embedder_url": url, "embedder_api_key_env": key_env}
    wanted = {"embedder_model_id": embedder.model_id,
              "embedder_spec": json.dumps(spec, sort_keys=True)}
    with store.write() as conn:
        if not store.holds_rows(conn, docs_table):
            for key, value in wanted.items():  # nothing stored yet: nothing to re-embed
                store.set_meta(conn, key, value)
    held = store.claim_meta(wanted)
    if held["embedder_model_id"] != embedder.model_id:
        recorded_name = json.loads(held["embedder_spec"]).get("embedder", "auto")
        raise MemoryStoreError(
            f"the {store.kind} {store.path} was built with embedder "
            f"{held['embedder_model_id']!r}, but [memory.options] asks for {embedder.model_id!r}: "
            f"set embedder = \"{recorded_name}\" (or \"auto\") to use this store, or run "
            f"`middle memory reindex --from {backend}` to rebuild it with the new embedder")
    return embedder


def claim_vector_kind(store: Any, asked: str, table: str, backend: str) -> str:
    """The kind of part vectors (a fact's, a sentence's) a store holds: "passage" (pooled from
    the document's own token states), "text" (the part embedded alone) or another the backend
    names. Vectors of two kinds score one query on two scales, so a store keeps its kind; a
    store with no rows in `table` takes the one asked for ("auto": "passage"). A store written
    before the kind was recorded embedded its parts alone: it goes on as "text" (or the
    non-"passage" kind asked for), and "passage" needs a rebuild."""
    with store.write() as conn:
        held = store.meta(conn, "fact_vector_kind")
        has_rows = store.holds_rows(conn, table)
        if held is None and has_rows:  # written before the kind was recorded
            if asked == "passage":
                raise ConfigError(_kind_message(store, "text", asked, backend))
            held = "text" if asked == "auto" else asked
            store.set_meta(conn, "fact_vector_kind", held)
        elif held is None or (not has_rows and asked != "auto"):
            held = "passage" if asked == "auto" else asked
            store.set_meta(conn, "fact_vector_kind", held)
    if asked not in ("auto", held):
        raise ConfigError(_kind_message(store, held, asked, backend))
    return held


def _kind_message(store: Any, held: str, asked: str, backend: str) -> str:
    return (f"the {store.kind} {store.path} holds fact vectors of kind {held!r}, but "
            f"[memory.options] asks for fact_vectors = {asked!r}: set it to \"auto\" to use "
            f"this store, or run `middle memory reindex --from {backend}` to rebuild it with "
            "the new kind")


def _refuse_recorded_endpoint(store: Any, recorded: dict[str, Any], options: Any) -> None:
    """A store's record may name the embedder, but not where text and an API key are sent:
    a planted record (a shared database is written by many) must not redirect them. The
    endpoint must be the one [memory.options] names."""
    url, key_env = recorded.get("embedder_url"), recorded.get("embedder_api_key_env")
    if (url or key_env) and (url, key_env) != (options.embedder_url, options.embedder_api_key_env):
        raise MemoryStoreError(
            f"the {store.kind} {store.path} was built with embedder "
            f"{recorded.get('embedder')!r} at {url or 'its default URL'} (key from "
            f"{key_env or 'no variable'}); a store's record does not choose where text and keys "
            "are sent: set embedder, embedder_url and embedder_api_key_env in [memory.options] "
            "to use it")


class QueryVectors:
    """The vectors of a few recent queries, per backend instance: the agent repeats its recall
    query within a run, and embedding one costs milliseconds. Not shared between instances, so
    a fresh instance (a benchmark's) times the embedding honestly."""

    def __init__(self, embedder: Any, size: int = RECENT_QUERIES):
        self.embedder, self.size = embedder, size
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, query: str) -> np.ndarray:
        vector = self._recent.pop(query, None)
        if vector is None:
            vector = self.embedder.embed_query(query)
        self._recent[query] = vector
        while len(self._recent) > self.size:
            self._recent.popitem(last=False)
        return vector


class SharesDatabase:
    """A built-in backend whose store can live in PostgreSQL (`[memory] url`): put it first
    among the bases. The facade then passes `database=` to `__init__` and `store_exists`; a
    project's store of the backend there is listed in `retrieval_stores` (backends.pg_database)."""

    name: ClassVar[str]
    shares_database: ClassVar[bool] = True

    @classmethod
    def store_exists(cls, store_dir: Path, database: MemoryDatabase | None = None) -> bool:
        if database is None:
            return super().store_exists(store_dir)  # type: ignore[misc]
        from backends.pg_database import store_exists

        return store_exists(database, cls.name)


class DocumentListing:
    """`list_docs`, `list_records` and `has_doc` answered from the backend's `_doc_table` (put it
    before MemoryBackend among the bases)."""

    _doc_table: "DocumentTable"

    def _catch_up(self) -> None:
        """Docs other programs wrote, caught up first (rederive.CatchesUp overrides it)."""

    def list_docs(self) -> list[str]:
        self._catch_up()
        return self._doc_table.texts()

    def list_records(self) -> list[tuple[str, float]]:
        """Every document with the time it is dated by, oldest first: the docs' own rows, as
        they are (no catch-up first: `middle memory reindex` reads them from a store whose
        derived rows cannot be made)."""
        return self._doc_table.records()

    def has_doc(self, doc: str) -> bool:
        self._catch_up()
        return self._doc_table.has(self._doc_table.hash_text(doc))

    def docs_by_id(self, prefix: str) -> list[str]:
        self._catch_up()
        return self._doc_table.with_hash_prefix(prefix)

    def fingerprint(self) -> str | None:
        self._catch_up()
        return self._doc_table.fingerprint()

    def doc_time(self, doc: str) -> float | None:
        self._catch_up()
        return self._doc_table.time_of(doc)


class DocumentTable:
    """`list_docs`, `list_records` and `has_doc` over one SQLite table of whole documents (hipporag's
    passages, hindsight's documents): the text, the time it is dated by, the hash it is found by."""

    def __init__(self, read: Any, table: str, time_column: str, hash_column: str, hash_text: Any):
        # Identifiers are this module's callers' constants, never user input.
        self._read, self._table, self._time, self._hash = read, table, time_column, hash_column
        self.hash_text = hash_text  # text -> the hash the table stores
        self.table, self.hash_column = table, hash_column  # for a rebuild (backends.rederive)

    def texts(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute(f"SELECT text FROM {self._table} ORDER BY id")]

    def records(self) -> list[tuple[str, float]]:
        """Every document with its time, oldest first."""
        with self._read() as conn:
            return [tuple(r) for r in conn.execute(f"SELECT text, {self._time} FROM {self._table} ORDER BY id")]

    def with_hash_prefix(self, prefix: str) -> list[str]:
        """The documents whose hash (a hex SHA-256 of the text) starts with `prefix`: a range
        of the hash's index, not a scan of the table."""
        low, high = hash_range(prefix)
        with self._read() as conn:
            return [r[0] for r in conn.execute(
                f"SELECT text, {self._hash} FROM {self._table} WHERE {self._hash} >= ? AND "
                f"{self._hash} <= ? ORDER BY id", (low, high)) if str(r[1]).startswith(prefix)]

    def time_of(self, text: str) -> float | None:
        """The time a document is dated by, found by its hash, or None."""
        with self._read() as conn:
            row = conn.execute(f"SELECT text, {self._time} FROM {self._table} WHERE {self._hash} = ?"
                               " ORDER BY id LIMIT 1", (self.hash_text(text),)).fetchone()
        return float(row[1]) if row is not None and row[0] == text and row[1] is not None else None

    def fingerprint(self) -> str:
        """How many documents, the newest id given (AUTOINCREMENT, or a sequence: never given
        twice) and how many writes of their text or time the store counted (the store's
        CountedWrites, by triggers: a document rewritten in place by any tool moves it too),
        so any add, delete or rewrite changes it and derived rows (facts) do not."""
        with self._read() as conn:
            count, newest = conn.execute(f"SELECT COUNT(*), COALESCE(MAX(id), 0) FROM {self._table}").fetchone()
            writes = Store.doc_writes(conn)
        return f"{count}:{newest}:{writes}"

    def has(self, hash_: str) -> bool:
        with self._read() as conn:
            return conn.execute(f"SELECT 1 FROM {self._table} WHERE {self._hash} = ? LIMIT 1",
                                (hash_,)).fetchone() is not None

