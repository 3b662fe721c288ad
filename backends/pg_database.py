"""The PostgreSQL side of every memory store: the shared tables (versioned, migrated under an
advisory lock) with the registry of stores, the text search configuration, the stores' write
locks, and one connection pool per database per process."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from orchestrator.plugin_api import MemoryDatabase, MemoryStoreError

INSTALL_HINT = "pip install 'middle-agent[postgres]'"
SCHEMA_VERSION = 6  # 2: retrieval_chunks (a doc's chunk vectors; see chunking.py); 3: doc_writes;
# 4: retrieval_outside_writes (docs other programs write, caught up: backends/retrieval/outside.py);
# 5: retrieval_df (each term's document frequency, kept by triggers on retrieval_postings);
# 6: retrieval_outside_writes_by_doc (middle's writes clear their own rows by doc id)
# Schema creation and migration take this transaction-level advisory lock, so two machines
# starting at once do not both create tables ("mdlmem" in ASCII; the ticket store uses "middle").
SCHEMA_LOCK_KEY = 0x6D646C6D656D
POOL_MAX = 8
# Seconds a pooled connection may sit unused before it is closed (the pool keeps none): a worker
# between memory calls holds only its ticket store's connections, however many tickets it ran.
IDLE_S = 5.0
CONNECT_TIMEOUT_S = 30.0
TS_CONFIG = "middle_memory_english"
# Transaction-level advisory locks of writers, per store: writes to one project's store take
# turns across machines as BEGIN IMMEDIATE makes them on one SQLite file ("mdlw" in ASCII).
WRITE_LOCK_SPACE = 0x6D646C77
# Set (transaction-local) by middle's writes of postings, which add their terms to retrieval_df
# themselves: the trigger that counts another writer's postings then skips them.
DF_COUNTED_SETTING = "middle.df_counted"

# Tables are prefixed `retrieval_`: the ticket store, often in the same database, has its own
# `memory_docs`. `retrieval_stores` lists every store, a project's store of one backend: the
# retrieval backends keep their rows in the tables below, keyed by its id (which leads every
# index, so a project's rows are found without touching another project's); the others keep
# theirs in a schema of their own named after it (see backends.pg_storage).
SCHEMA = [
    "CREATE TABLE IF NOT EXISTS retrieval_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS retrieval_stores (
        id BIGSERIAL PRIMARY KEY,
        project TEXT NOT NULL,
        backend TEXT NOT NULL,
        n_docs BIGINT NOT NULL DEFAULT 0,
        total_len BIGINT NOT NULL DEFAULT 0,
        UNIQUE (project, backend))""",
    """CREATE TABLE IF NOT EXISTS retrieval_meta (
        store_id BIGINT NOT NULL REFERENCES retrieval_stores (id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (store_id, key))""",
    """CREATE TABLE IF NOT EXISTS retrieval_docs (
        id BIGSERIAL PRIMARY KEY,
        store_id BIGINT NOT NULL REFERENCES retrieval_stores (id) ON DELETE CASCADE,
        hash TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        doc_time DOUBLE PRECISION NOT NULL,
        importance INTEGER NOT NULL DEFAULT 3,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_accessed DOUBLE PRECISION,
        doc_len INTEGER NOT NULL DEFAULT 0,
        UNIQUE (store_id, hash))""",
    "CREATE INDEX IF NOT EXISTS retrieval_docs_by_time ON retrieval_docs (store_id, doc_time)",
    # pgvector, any dimension: a store's embedder fixes it, and search is exact (as the SQLite
    # store's FAISS flat index), so no dimension-bound ANN index is needed.
    """CREATE TABLE IF NOT EXISTS retrieval_vectors (
        id BIGINT PRIMARY KEY REFERENCES retrieval_docs (id) ON DELETE CASCADE,
        store_id BIGINT NOT NULL,
        embedding vector NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS retrieval_vectors_by_store ON retrieval_vectors (store_id)",
    # Since version 2 a doc's vectors are its chunks' (retrieval_vectors keeps a version 1
    # store's single vectors until `middle memory reindex` re-embeds it).
    """CREATE TABLE IF NOT EXISTS retrieval_chunks (
        doc_id BIGINT NOT NULL REFERENCES retrieval_docs (id) ON DELETE CASCADE,
        chunk INTEGER NOT NULL,
        store_id BIGINT NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (doc_id, chunk))""",
    "CREATE INDEX IF NOT EXISTS retrieval_chunks_by_store ON retrieval_chunks (store_id)",
    # BM25 postings: a doc's lexemes (from to_tsvector) with their counts and the doc's length,
    # so a query reads only the postings of its own terms (an index-only range scan).
    """CREATE TABLE IF NOT EXISTS retrieval_postings (
        store_id BIGINT NOT NULL,
        term TEXT NOT NULL,
        doc_id BIGINT NOT NULL REFERENCES retrieval_docs (id) ON DELETE CASCADE,
        tf INTEGER NOT NULL,
        doc_len INTEGER NOT NULL,
        PRIMARY KEY (store_id, term, doc_id) INCLUDE (tf, doc_len))""",
    "CREATE INDEX IF NOT EXISTS retrieval_postings_by_doc ON retrieval_postings (doc_id)",
    # Since version 3: a row per write of a store's docs (an insert, a delete, an update of a
    # doc's hash, text or time, not of its access counts), added by the trigger below for any
    # program's write: PgRetrievalStore.fingerprint reads the greatest `n`, so a doc rewritten
    # in place is seen. A row per write, not a count kept in retrieval_stores: the trigger then
    # locks no row another writer holds (see pg_storage.pg_counter). No reference to
    # retrieval_stores either, for the same reason; middle's writes keep only the newest row.
    """CREATE TABLE IF NOT EXISTS retrieval_doc_writes (
        store_id BIGINT NOT NULL,
        n BIGSERIAL,
        PRIMARY KEY (store_id, n))""",
    # Since version 4: the docs another program wrote (an insert, a delete, a rewrite of the
    # text), logged by the trigger below; middle's own writes clear their rows in their own
    # transaction, and the store catches up on the rest (PgRetrievalStore.catch_up): postings,
    # hash and store totals from the text as it is now, and new vectors.
    """CREATE TABLE IF NOT EXISTS retrieval_outside_writes (
        store_id BIGINT NOT NULL,
        seq BIGSERIAL,
        doc_id BIGINT NOT NULL,
        PRIMARY KEY (store_id, seq))""",
    # Since version 6: middle's write of a doc deletes the rows its own triggers logged, by
    # (store_id, doc_id); without this index each such delete read every row the store had
    # logged (PgRetrievalStore._forget_own: once per doc written).
    "CREATE INDEX IF NOT EXISTS retrieval_outside_writes_by_doc ON retrieval_outside_writes (store_id, doc_id)",
    """CREATE TABLE IF NOT EXISTS retrieval_needs_vectors (
        doc_id BIGINT PRIMARY KEY REFERENCES retrieval_docs (id) ON DELETE CASCADE,
        store_id BIGINT NOT NULL)""",
    # Since version 5: how many of a store's docs hold each term (its postings), which BM25's
    # idf reads. Counting them in each query read every posting of a common term twice (0.23 s
    # at 100,000 docs, docs/benchmarks.md). middle's writes add their postings' terms up and
    # add them to retrieval_df once before they commit (PgRetrievalStore.fold_df, under the
    # store's write lock); every delete of postings, by anyone (middle, a cascade from a doc or
    # store another program deletes), appends its counts by term to retrieval_df_delta in its
    # own transaction (statement triggers: _postings_df_triggers), which the next fold moves
    # into retrieval_df, and BM25 reads both, so a count is exact at once. Deltas, not updates
    # of retrieval_df in the trigger: a transaction of thousands of docs would update the row
    # of a word every doc holds once per doc, each update stepping over the versions of it the
    # transaction left. A term no doc holds any more has no row. No reference to
    # retrieval_stores: a store's delete cascades to its postings, whose deltas then count it.
    """CREATE TABLE IF NOT EXISTS retrieval_df (
        store_id BIGINT NOT NULL,
        term TEXT NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (store_id, term))""",
    """CREATE TABLE IF NOT EXISTS retrieval_df_delta (
        store_id BIGINT NOT NULL,
        term TEXT NOT NULL,
        d BIGINT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS retrieval_df_delta_by_term ON retrieval_df_delta (store_id, term)",
    # Snowball English stemming of every word, stop words kept (as SQLite FTS5's porter
    # tokenizer indexes them); the query side drops stop words as it does for FTS5.
    f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = '{TS_CONFIG}_stem') THEN
            CREATE TEXT SEARCH DICTIONARY {TS_CONFIG}_stem (TEMPLATE = snowball, Language = english);
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = '{TS_CONFIG}') THEN
            CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = simple);
            ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG}
                ALTER MAPPING FOR asciiword, word WITH {TS_CONFIG}_stem;
        END IF;
    END $$""",
]


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
        from pgvector.psycopg import register_vector  # noqa: F401
    except ImportError as exc:
        raise MemoryStoreError(f"memory in PostgreSQL needs psycopg and pgvector ({exc}): "
                               f"{INSTALL_HINT}") from None
    return psycopg


def failure(database: MemoryDatabase, exc: BaseException, what: str, backend: str = "") -> MemoryStoreError:
    """A database error as one MemoryStoreError naming the database (never its password) and
    the backend whose store it is, when given."""
    psycopg = _psycopg()
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.OperationalError) or type(exc).__name__ == "PoolTimeout":
        hint = "check [memory] url (or [store] url) and that the server is running"
    elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
        hint = "grant the user rights to create tables there (or create them as an owner once)"
    else:
        hint = ("if its memory tables were changed by hand, restore them or move the project's "
                "rows away (middle memory export first)")
    store = f"the {backend} memory store" if backend else "the memory store"
    return MemoryStoreError(f"{what} {store} in {database.where}: {detail}; {hint}")


class Database:
    """One PostgreSQL database in this process: its pool (pgvector types registered on every
    connection) and the schema, checked and migrated once when first opened."""

    def __init__(self, database: MemoryDatabase):
        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        self.url, self.users = database.url, 0
        try:
            with psycopg.connect(database.url, connect_timeout=int(CONNECT_TIMEOUT_S)) as conn:
                _migrate(conn, database)
        except psycopg.Error as exc:
            raise failure(database, exc, "cannot open") from None
        self.pool = ConnectionPool(database.url, min_size=0, max_size=POOL_MAX, max_idle=IDLE_S, open=False,
                                   configure=_register_vector, check=ConnectionPool.check_connection,
                                   name="middle-memory")
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:
            self.pool.close()
            raise failure(database, exc, "cannot reach") from None

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection in a transaction: committed at the end, rolled back on error."""
        with self.pool.connection(timeout=CONNECT_TIMEOUT_S) as conn:
            yield conn


def _register_vector(conn: Any) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.commit()  # the type lookup opened a transaction; a pooled connection must come back idle


def _migrate(conn: Any, database: MemoryDatabase) -> None:
    """Create the extension and tables, or check that existing ones are not newer than ours."""
    psycopg = _psycopg()
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        exists = conn.execute("SELECT to_regclass('retrieval_schema') IS NOT NULL").fetchone()[0]
        if exists:
            row = conn.execute("SELECT MAX(version) FROM retrieval_schema").fetchone()
            if row[0] is not None and row[0] > SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"the memory tables in {database.where} have schema version {row[0]}, newer "
                    f"than this middle-agent reads ({SCHEMA_VERSION}): upgrade middle-agent "
                    "(pip install -U middle-agent) on this machine")
            if row[0] == SCHEMA_VERSION:
                return
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            raise MemoryStoreError(
                f"the database {database.where} lacks the pgvector extension and this user may "
                "not create it: run `CREATE EXTENSION vector;` there once as its owner or a "
                "superuser (managed PostgreSQL services offer pgvector)") from None
        except psycopg.errors.FeatureNotSupported as exc:
            raise MemoryStoreError(f"the server of {database.where} has no pgvector ({exc}): "
                                   "install it (https://github.com/pgvector/pgvector)") from None
        counted = conn.execute("SELECT to_regclass('retrieval_df') IS NOT NULL").fetchone()[0]
        for statement in SCHEMA:
            conn.execute(statement)
        for statement in _doc_triggers(conn) + _postings_df_triggers(conn):
            conn.execute(statement)
        if not counted:  # an older database's postings, counted once (under the schema lock)
            conn.execute("INSERT INTO retrieval_df (store_id, term, n) SELECT store_id, term, count(*) "
                         "FROM retrieval_postings GROUP BY store_id, term")
        conn.execute("INSERT INTO retrieval_schema SELECT %s WHERE NOT EXISTS "
                     "(SELECT 1 FROM retrieval_schema)", (SCHEMA_VERSION,))
        conn.execute("UPDATE retrieval_schema SET version = %s", (SCHEMA_VERSION,))


def _doc_triggers(conn: Any) -> list[str]:
    """The triggers on retrieval_docs, each with its function. A function names the tables with
    the schema it was made in: a tool's own UPDATE runs with its own search path. Created once,
    under the schema lock (an existing database gets them in place; a process that has it open
    goes on, its writes counted and logged from then on)."""
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    # A row in retrieval_doc_writes for each write of a doc's hash, text or time.
    counter = _trigger(schema, "retrieval_docs_writes_counted", "retrieval_count_doc_writes",
                       "INSERT OR DELETE OR UPDATE OF hash, text, doc_time", f"""
            INSERT INTO {schema}.retrieval_doc_writes (store_id)
            VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.store_id ELSE NEW.store_id END);""")
    # Each insert, delete and rewrite of a doc's text in retrieval_outside_writes (outside.py).
    log = _trigger(schema, "retrieval_docs_outside_logged", "retrieval_log_outside_write",
                   "INSERT OR DELETE OR UPDATE OF text", f"""
            IF TG_OP = 'DELETE' THEN
                INSERT INTO {schema}.retrieval_outside_writes (store_id, doc_id) VALUES (OLD.store_id, OLD.id);
            ELSIF TG_OP = 'INSERT' OR OLD.text IS DISTINCT FROM NEW.text THEN
                INSERT INTO {schema}.retrieval_outside_writes (store_id, doc_id) VALUES (NEW.store_id, NEW.id);
            END IF;""")
    return counter + log


def _postings_df_triggers(conn: Any) -> list[str]:
    """Statement triggers on retrieval_postings appending to retrieval_df_delta the postings a
    statement removed (-), counted by term: one insert per statement, not per row, and never an
    update, so a long transaction leaves no chain of row versions behind. Its deletes come from
    middle and from cascades (a doc or store deleted by any program). middle's writes count the
    postings they add themselves (a trigger's transition table per doc cost a quarter more on
    indexing); another writer's inserts (an older middle-agent still running, a tool) are
    counted a row at a time. An UPDATE by another program counts as its old rows removed and
    its new ones added."""
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()[0]
    add = f"""
            INSERT INTO {schema}.retrieval_df_delta (store_id, term, d)
            SELECT store_id, term, count(*) FROM added GROUP BY store_id, term;"""
    remove = f"""
            INSERT INTO {schema}.retrieval_df_delta (store_id, term, d)
            SELECT store_id, term, -count(*) FROM removed GROUP BY store_id, term;"""
    table = f"{schema}.retrieval_postings"
    # An insert by a writer that does not count its own (another program, an older
    # middle-agent still running on the database): a delta per posting. A row trigger whose
    # condition skips middle's writes, which say they count theirs (DF_COUNTED_SETTING).
    uncounted = f"""
            INSERT INTO {schema}.retrieval_df_delta (store_id, term, d) VALUES (NEW.store_id, NEW.term, 1);"""
    return (_trigger(schema, "retrieval_postings_df_uncounted", "retrieval_df_uncounted", "INSERT", uncounted,
                     table=table, when=f"current_setting('{DF_COUNTED_SETTING}', true) IS DISTINCT FROM 'on'")
            + _trigger(schema, "retrieval_postings_df_removed", "retrieval_df_removed", "DELETE", remove,
                       table=table, per="STATEMENT", referencing="OLD TABLE AS removed")
            + _trigger(schema, "retrieval_postings_df_updated", "retrieval_df_updated", "UPDATE", remove + add,
                       table=table, per="STATEMENT", referencing="OLD TABLE AS removed NEW TABLE AS added"))


def _trigger(schema: str, name: str, function: str, events: str, body: str, *, table: str = "",
             per: str = "ROW", referencing: str = "", when: str = "") -> list[str]:
    """An AFTER ... FOR EACH ROW (or STATEMENT) trigger on retrieval_docs (or `table`) running
    `body` (`when` its condition), made if missing."""
    table = table or f"{schema}.retrieval_docs"
    referencing = f"REFERENCING {referencing} " if referencing else ""
    per = f"{per} WHEN ({when})" if when else per
    return [
        f"""CREATE OR REPLACE FUNCTION {schema}.{function}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN{body}
            RETURN NULL;
        END $$""",
        f"""DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{name}'
                           AND tgrelid = '{table}'::regclass) THEN
                CREATE TRIGGER {name} AFTER {events} ON {table} {referencing}
                FOR EACH {per} EXECUTE FUNCTION {schema}.{function}();
            END IF;
        END $$"""]


_open: dict[str, Database] = {}
_open_lock = threading.Lock()


def acquire(database: MemoryDatabase) -> Database:
    """The process's Database for this URL (opened, and its schema checked, on first use)."""
    with _open_lock:
        db = _open.get(database.url)
        if db is None:
            db = _open[database.url] = Database(database)
        db.users += 1
        return db


def release(db: Database) -> None:
    """One user fewer; the pool closes with the last one."""
    with _open_lock:
        db.users -= 1
        if db.users <= 0 and _open.get(db.url) is db:
            del _open[db.url]
            db.pool.close()


class PoolUser:
    """A store holding the process's Database of its URL (`acquire`) until closed."""

    kind: str
    path: str
    lock: threading.RLock
    _db: Database | None

    @property
    def closed(self) -> bool:
        return self._db is None

    def close(self) -> None:
        with self.lock:
            if self._db is not None:
                release(self._db)
                self._db = None

    def _require_open(self) -> Database:
        if self._db is None:
            raise MemoryStoreError(f"the {self.kind} in {self.path} is closed")
        return self._db


def register_store(conn: Any, database: MemoryDatabase, backend: str) -> int:
    """The id of the project's store of the backend, listed now if it was not (inside the
    caller's transaction)."""
    conn.execute("INSERT INTO retrieval_stores (project, backend) VALUES (%s, %s) "
                 "ON CONFLICT (project, backend) DO NOTHING", (database.project, backend))
    return int(conn.execute("SELECT id FROM retrieval_stores WHERE project = %s AND backend = %s",
                            (database.project, backend)).fetchone()[0])


def lock_store_writes(conn: Any, store_id: int) -> None:
    """Take the store's write lock until the caller's transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (WRITE_LOCK_SPACE, store_id % (2**31)))


def store_exists(database: MemoryDatabase, backend: str) -> bool:
    """Whether the database holds this project's store of the backend; creates nothing."""
    psycopg = _psycopg()
    sql = "SELECT EXISTS (SELECT 1 FROM retrieval_stores WHERE project = %s AND backend = %s)"
    try:
        with _peek(database) as conn:
            if not conn.execute("SELECT to_regclass('retrieval_stores') IS NOT NULL").fetchone()[0]:
                return False
            return bool(conn.execute(sql, (database.project, backend)).fetchone()[0])
    except psycopg.Error as exc:
        raise failure(database, exc, "cannot read") from None


@contextmanager
def _peek(database: MemoryDatabase) -> Iterator[Any]:
    """A connection for a read-only look: the open pool's, else a short-lived one (a read-only
    command must not create the tables an open would)."""
    with _open_lock:
        db = _open.get(database.url)
    if db is not None:
        with db.connection() as conn:
            yield conn
        return
    psycopg = _psycopg()
    with psycopg.connect(database.url, connect_timeout=int(CONNECT_TIMEOUT_S)) as conn:
        yield conn
