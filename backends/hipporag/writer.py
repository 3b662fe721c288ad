"""Adds and removes passages inside one write transaction, keeping every edge's contributors exact.

Synonymy is incremental: each entity keeps its nearest `k` entities with cosine >= threshold
(ties by name), and the edge set is the union of these lists. A new entity searches the entity
index once for its own list and offers itself to each neighbour above the threshold; a removed
entity leaves the lists that held it, and only those lists that were full are searched again.
So the lists always equal a from-scratch computation over the entities present and their
vectors, whatever order passages came and went in, and adding docs costs in proportion to the
new entities. With fact_vectors = "passage" an entity's vector is its reading in its earliest
holder (see readings): a delete that removes that holder re-reads the entity and moves it
through the lists as a removal and an addition, so the store is the one that never held the doc.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from backends.retrieval.chunking import CHUNK_SLOTS
from backends.retrieval.mirror import IndexMirror
from backends.storage import CHUNK, inserted_id

from .extract import Extraction
from .readings import Reading
from .store import to_blob


@dataclass
class NewPassage:
    text: str
    hash: str
    vectors: np.ndarray  # its chunks' (n_chunks, d), see retrieval.chunking
    extraction: Extraction
    time: float | None = None  # when the work it records was done; None: now
    reading: Reading | None = None  # fact_vectors = "passage": its entities' and facts' vectors


# Predicates that say nothing beyond "these two names go together" (a list, a topic's mention).
BARE_PREDICATES = frozenset({"", "and", "or", "mentions"})


def composed(triple: tuple[str, str, str], fact_vectors: str) -> bool:
    """Whether a fact's vector is built from its names' vectors rather than embedded: always
    with fact_vectors = "entities", and with "text" for a bare predicate (a list such as
    "Changed: a.py, b.py" says nothing its two names do not), so indexing pays no model call
    for it. Never with "passage": a fact is read from its passage (or embedded alone), so no
    fact vector depends on entity vectors, which a delete may re-read."""
    return fact_vectors == "entities" or (fact_vectors == "text" and triple[1] in BARE_PREDICATES)


def fact_text(subject: str, predicate: str, obj: str) -> str:
    """What a fact's vector embeds."""
    return " ".join(part for part in (subject, predicate, obj) if part)


def alnum_count(name: str) -> int:
    return sum(c.isalnum() for c in name)


class GraphWriter:
    """One write transaction's work; `changes` collects the (kind, id) vector rows touched."""

    def __init__(self, conn: sqlite3.Connection, entities: IndexMirror, threshold: float, k: int,
                 min_chars: int, vectors_for: Callable[[list[str]], dict[str, np.ndarray]],
                 now: float, fact_vectors: str = "text",
                 reread: Callable[[int], Reading | None] | None = None):
        self.conn, self.entities, self.now = conn, entities, now
        self.fact_vectors = fact_vectors
        self.reread = reread  # a stored passage's reading, for fact_vectors = "passage"
        self.threshold, self.k, self.min_chars = threshold, k, min_chars
        self.vectors_for = vectors_for  # embeds entity names / fact texts this call lacks
        self.changes: list[tuple[str, int]] = []

    # --- adding ------------------------------------------------------------------------------

    def add(self, passages: list[NewPassage], known: dict[str, np.ndarray]) -> int:
        """Insert passages (an exact text already stored is skipped); return how many were new."""
        now = self.now
        new_entities: list[tuple[int, str]] = []
        added = 0
        for p in passages:
            cur = self.conn.execute(
                "INSERT INTO passages (hash, text, created_at, source) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (p.hash, p.text, now if p.time is None else p.time, p.extraction.source))
            if cur.rowcount == 0:
                continue
            added += 1
            pid = inserted_id(cur)
            self.conn.executemany("INSERT INTO passage_chunks VALUES (?, ?)",
                                  [(pid * CHUNK_SLOTS + n, to_blob(v)) for n, v in enumerate(p.vectors)])
            self.changes.append(("p", pid))
            ids = {name: self._entity(name, known, new_entities, p.reading)
                   for name in p.extraction.entities}
            self.conn.executemany("INSERT INTO passage_entities VALUES (?, ?) ON CONFLICT DO NOTHING",
                                  [(pid, eid) for eid in ids.values()])
            for (s, pred, o), count in Counter(p.extraction.triples).items():
                fid = self._fact(ids[s], pred, ids[o], (s, pred, o), known, p.reading)
                self.conn.execute("INSERT INTO passage_facts VALUES (?, ?, ?)", (pid, fid, count))
                if ids[s] != ids[o]:
                    a, b = sorted((ids[s], ids[o]))
                    self.conn.execute(
                        "INSERT INTO fact_edges VALUES (?, ?, ?) ON CONFLICT (a, b) "
                        "DO UPDATE SET weight = fact_edges.weight + excluded.weight", (a, b, count))
                    self.changes += [("g", a), ("g", b)]
        self._link_synonyms(new_entities)
        return added

    def _vector(self, text: str, known: dict[str, np.ndarray]) -> np.ndarray:
        if text not in known:  # another writer removed it since we looked: embed it now
            known.update(self.vectors_for([text]))
        return known[text]

    def _entity(self, name: str, known: dict[str, np.ndarray],
                new_entities: list[tuple[int, str]], reading: Reading | None = None) -> int:
        row = self.conn.execute("SELECT id FROM entities WHERE name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
        eid = inserted_id(self.conn.execute("INSERT INTO entities (name) VALUES (?)", (name,)))
        self.changes.append(("n", eid))
        if self.k > 0 and alnum_count(name) >= self.min_chars:
            vector = (reading.entities[name] if reading and name in reading.entities
                      else self._vector(name, known))
            self.conn.execute("INSERT INTO entity_vectors VALUES (?, ?)", (eid, to_blob(vector)))
            self.changes.append(("e", eid))
            new_entities.append((eid, name))
        return eid

    def _fact_vector(self, triple: tuple[str, str, str], subject: int, obj: int,
                     known: dict[str, np.ndarray]) -> np.ndarray:
        """The fact's text embedded, or (see `composed`) the normalised sum of its subject's and
        object's name vectors: no model call for a fact between names already embedded."""
        if not composed(triple, self.fact_vectors):
            return self._vector(fact_text(*triple), known)
        stored = self._vectors([subject, obj])
        parts = [stored[i] if i in stored else self._vector(name, known)
                 for i, name in ((subject, triple[0]), (obj, triple[2]))]
        total = np.asarray(parts[0], dtype=np.float32) + np.asarray(parts[1], dtype=np.float32)
        norm = float(np.linalg.norm(total))
        return total / norm if norm > 0 else total

    def _fact(self, subject: int, predicate: str, obj: int, triple: tuple[str, str, str],
              known: dict[str, np.ndarray], reading: Reading | None = None) -> int:
        row = self.conn.execute("SELECT id FROM facts WHERE subject = ? AND predicate = ? AND "
                                "object = ?", (subject, predicate, obj)).fetchone()
        if row is not None:
            return int(row[0])
        fid = inserted_id(self.conn.execute("INSERT INTO facts (subject, predicate, object) VALUES "
                                         "(?, ?, ?)", (subject, predicate, obj)))
        vector = (reading.facts[triple] if reading and triple in reading.facts
                  else self._fact_vector(triple, subject, obj, known))
        self.conn.execute("INSERT INTO fact_vectors VALUES (?, ?)", (fid, to_blob(vector)))
        self.changes.append(("f", fid))
        return fid

    # --- synonymy ------------------------------------------------------------------------------

    def _vectors(self, ids: list[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            for i, blob in self.conn.execute(
                    f"SELECT id, vec FROM entity_vectors WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk):
                out[i] = np.frombuffer(blob, dtype=np.float32)
        return out

    def _names(self, ids: list[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            out.update(self.conn.execute(
                f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def _above(self, eid: int, vector: np.ndarray, limit: int | None) -> list[tuple[int, float]]:
        """Entities with cosine >= threshold (all of them, or the nearest `limit`)."""
        k = (limit or self.k) + 1
        while True:
            ids, scores = self.entities.search(vector, k)
            if len(ids) < k or scores[-1] < self.threshold or (limit and k > limit):
                break
            k *= 4  # the threshold reaches further: widen until it is crossed
        return [(i, s) for i, s in zip(ids, scores) if i != eid and s >= self.threshold]

    def _ranked(self, pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
        names = self._names([i for i, _ in pairs])
        return sorted(pairs, key=lambda p: (-p[1], names[p[0]]))[:self.k]

    def _recompute(self, eid: int, vector: np.ndarray,
                   above: list[tuple[int, float]] | None = None) -> None:
        """Set eid's list to its k best neighbours (from `above` when already searched)."""
        if above is None:
            above = self._above(eid, vector, self.k)
        old = [r[0] for r in self.conn.execute("SELECT neighbour FROM synonyms WHERE entity = ?", (eid,))]
        self.conn.execute("DELETE FROM synonyms WHERE entity = ?", (eid,))
        new = self._ranked(above)
        self.conn.executemany("INSERT INTO synonyms VALUES (?, ?, ?)", [(eid, n, s) for n, s in new])
        self.changes += [("g", i) for i in (eid, *old, *(n for n, _ in new))]

    def _link_synonyms(self, new_entities: list[tuple[int, str]]) -> None:
        if not new_entities:
            return
        fresh = {eid for eid, _ in new_entities}
        vectors = self._vectors(sorted(fresh))
        self.entities.add(sorted(fresh), np.vstack([vectors[i] for i in sorted(fresh)]))
        offers: dict[int, list[tuple[int, str, float]]] = {}
        for eid, name in new_entities:
            above = self._above(eid, vectors[eid], None)  # one search serves both directions
            self._recompute(eid, vectors[eid], above)
            for other, score in above:
                if other not in fresh:
                    offers.setdefault(other, []).append((eid, name, score))
        self._offer(offers)

    def _offer(self, offers: dict[int, list[tuple[int, str, float]]]) -> None:
        """Each owner's list becomes the k best (by score, ties by name) of what it held and the
        candidates offered to it: what offering them one at a time leaves, read in one query a
        chunk of owners and written in one batch. One at a time it was a read and up to two
        writes per offer, and offers grow with the square of near-alike names (500 docs of
        "Task N" and "src/fN.py" into a store of 500 made 454,154 offers: 78 s on SQLite, and
        many minutes on PostgreSQL, a round trip each)."""
        owners = sorted(offers)
        for start in range(0, len(owners), CHUNK):
            chunk = owners[start:start + CHUNK]
            held: dict[int, dict[int, tuple[float, str]]] = {owner: {} for owner in chunk}
            for owner, neighbour, score, name in self.conn.execute(
                    "SELECT s.entity, s.neighbour, s.score, e.name FROM synonyms s JOIN entities e ON "
                    f"e.id = s.neighbour WHERE s.entity IN ({','.join('?' * len(chunk))})", chunk):
                held[owner][neighbour] = (score, name)
            dropped: list[tuple[int, int]] = []
            put: list[tuple[int, int, float]] = []
            for owner in chunk:
                pool = dict(held[owner])
                pool.update({candidate: (score, name) for candidate, name, score in offers[owner]})
                best = sorted(pool, key=lambda n: (-pool[n][0], pool[n][1]))[:self.k]
                gone = [n for n in held[owner] if n not in best]
                new = [n for n in best if n not in held[owner] or held[owner][n] != pool[n]]
                dropped += [(owner, n) for n in gone]
                put += [(owner, n, pool[n][0]) for n in new]
                if gone or new:
                    self.changes += [("g", owner), *(("g", n) for n in (*gone, *new))]
            if dropped:
                self.conn.executemany("DELETE FROM synonyms WHERE entity = ? AND neighbour = ?", dropped)
            if put:
                self.conn.executemany("INSERT INTO synonyms VALUES (?, ?, ?) ON CONFLICT (entity, neighbour) "
                                      "DO UPDATE SET score = excluded.score", put)

    # --- removing --------------------------------------------------------------------------------

    def remove(self, pids: list[int]) -> None:
        """Remove passages, their contributions, and entities and facts no passage holds any
        more; with readings, an entity or fact whose earliest holder went is read again from
        the next one (see readings)."""
        owners = self._owners(pids) if self.reread is not None else None
        facts: set[int] = set()
        entities: set[int] = set()
        for pid in pids:
            if not self._held(pid):
                continue
            for fid, count, s, o in self.conn.execute(
                    "SELECT pf.fact, pf.count, f.subject, f.object FROM passage_facts pf JOIN facts f "
                    "ON f.id = pf.fact WHERE pf.passage = ?", (pid,)).fetchall():
                facts.add(fid)
                if s != o:
                    a, b = sorted((s, o))
                    self.conn.execute("UPDATE fact_edges SET weight = weight - ? WHERE a = ? AND b = ?",
                                      (count, a, b))
                    self.changes += [("g", a), ("g", b)]
            entities.update(r[0] for r in self.conn.execute(
                "SELECT entity FROM passage_entities WHERE passage = ?", (pid,)))
            for table, column in (("passage_facts", "passage"), ("passage_entities", "passage"),
                                  ("passage_vectors", "id"), ("passages", "id")):
                self.conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (pid,))
            self.conn.execute("DELETE FROM passage_chunks WHERE id >= ? AND id < ?",
                              (pid * CHUNK_SLOTS, (pid + 1) * CHUNK_SLOTS))
            self.changes.append(("p", pid))
        self.conn.execute("DELETE FROM fact_edges WHERE weight <= 0")
        for fid in sorted(facts):
            if self.conn.execute("SELECT 1 FROM passage_facts WHERE fact = ? LIMIT 1", (fid,)).fetchone() is None:
                self.conn.execute("DELETE FROM facts WHERE id = ?", (fid,))
                self.conn.execute("DELETE FROM fact_vectors WHERE id = ?", (fid,))
                self.changes.append(("f", fid))
        orphans = [eid for eid in sorted(entities) if self.conn.execute(
            "SELECT 1 FROM passage_entities WHERE entity = ? LIMIT 1", (eid,)).fetchone() is None]
        self._detach(orphans, drop=True)
        if owners is not None:
            self._read_again(*owners, set(pids))

    def _held(self, pid: int) -> bool:
        """Whether a passage or any of its derived rows is there (another program may have
        deleted the passage's row alone: its derived rows are removed all the same)."""
        return self.conn.execute(
            "SELECT 1 FROM passages WHERE id = ? UNION ALL SELECT 1 FROM passage_entities WHERE "
            "passage = ? UNION ALL SELECT 1 FROM passage_facts WHERE passage = ? UNION ALL "
            "SELECT 1 FROM passage_chunks WHERE id >= ? AND id < ? LIMIT 1",
            (pid, pid, pid, pid * CHUNK_SLOTS, (pid + 1) * CHUNK_SLOTS)).fetchone() is not None

    # --- readings after a delete -------------------------------------------------------------

    def _owners(self, pids: list[int]) -> tuple[dict[int, int | None], dict[int, int | None]]:
        """The earliest holder of each entity and fact of these passages (before removal)."""
        out: tuple[dict[int, int | None], dict[int, int | None]] = ({}, {})
        for held, table, column in ((out[0], "passage_entities", "entity"),
                                    (out[1], "passage_facts", "fact")):
            for pid in pids:
                for (item,) in self.conn.execute(f"SELECT {column} FROM {table} WHERE passage = ?",
                                                 (pid,)).fetchall():
                    if item not in held:
                        held[item] = self._earliest(table, column, item)
        return out

    def _earliest(self, table: str, column: str, item: int) -> int | None:
        return self.conn.execute(f"SELECT MIN(passage) FROM {table} WHERE {column} = ?",
                                 (item,)).fetchone()[0]

    def _read_again(self, entity_owners: dict[int, int | None], fact_owners: dict[int, int | None],
                    removed: set[int]) -> None:
        """Entities and facts that lost their earliest holder but live on take their reading
        in the next one (or their text embedded alone, when it has none)."""
        reread = self.reread
        assert reread is not None
        cache: dict[int, Reading | None] = {}

        def reading(pid: int) -> Reading | None:
            if pid not in cache:
                cache[pid] = reread(pid)
            return cache[pid]

        moved: dict[int, tuple[str, np.ndarray]] = {}
        for eid, owner in sorted(entity_owners.items()):
            holder = self._earliest("passage_entities", "entity", eid) if owner in removed else None
            if holder is None or self.conn.execute(
                    "SELECT 1 FROM entity_vectors WHERE id = ?", (eid,)).fetchone() is None:
                continue
            (name,) = self.conn.execute("SELECT name FROM entities WHERE id = ?", (eid,)).fetchone()
            got = reading(holder)
            vector = got.entities.get(name) if got else None
            moved[eid] = (name, vector if vector is not None else self._vector(name, {}))
        for fid, owner in sorted(fact_owners.items()):
            holder = self._earliest("passage_facts", "fact", fid) if owner in removed else None
            if holder is None:
                continue
            s, pred, o, sname, oname = self.conn.execute(
                "SELECT f.subject, f.predicate, f.object, a.name, b.name FROM facts f JOIN "
                "entities a ON a.id = f.subject JOIN entities b ON b.id = f.object WHERE f.id = ?",
                (fid,)).fetchone()
            got = reading(holder)
            vector = got.facts.get((sname, pred, oname)) if got else None
            if vector is None:
                vector = self._fact_vector((sname, pred, oname), s, o, {})
            self.conn.execute("UPDATE fact_vectors SET vec = ? WHERE id = ?", (to_blob(vector), fid))
            self.changes.append(("f", fid))
        if moved:
            self._detach(sorted(moved), drop=False)  # out of every list, as if removed ...
            for eid, (_, vector) in moved.items():
                self.conn.execute("UPDATE entity_vectors SET vec = ? WHERE id = ?",
                                  (to_blob(vector), eid))
                self.changes.append(("e", eid))
            self._link_synonyms([(eid, name) for eid, (name, _) in sorted(moved.items())])  # ... and back

    def _detach(self, orphans: list[int], drop: bool) -> None:
        """Take entities out of every synonymy list (refilling lists that were full) and out
        of the entity index; `drop` deletes them too."""
        if not orphans:
            return
        gone = set(orphans)
        holders: set[int] = set()
        full: set[int] = set()
        for eid in orphans:
            for owner, size in self.conn.execute(
                    "SELECT s.entity, (SELECT COUNT(*) FROM synonyms t WHERE t.entity = s.entity) "
                    "FROM synonyms s WHERE s.neighbour = ?", (eid,)).fetchall():
                holders.add(owner)
                if size >= self.k:
                    full.add(owner)
        for eid in orphans:
            self.changes += [("g", r[0]) for r in self.conn.execute(
                "SELECT neighbour FROM synonyms WHERE entity = ? UNION SELECT entity FROM synonyms "
                "WHERE neighbour = ?", (eid, eid))]
            self.changes.append(("g", eid))
            self.conn.execute("DELETE FROM synonyms WHERE entity = ? OR neighbour = ?", (eid, eid))
            if not drop:
                continue
            self.changes.append(("n", eid))
            self.conn.execute("DELETE FROM entities WHERE id = ?", (eid,))
            if self.conn.execute("DELETE FROM entity_vectors WHERE id = ?", (eid,)).rowcount:
                self.changes.append(("e", eid))
        self.entities.remove(orphans)
        # A list that was full may now admit an entity it had no room for: search it again.
        refill = sorted(full - gone)
        vectors = self._vectors(refill)
        for owner in refill:
            if owner in vectors:
                self._recompute(owner, vectors[owner])
