"""Observations (near-duplicate facts consolidated, one facet each, history kept) and exact
removal of facts, with observations left without support removed too."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Sequence

import numpy as np

from backends import retrieval
from backends.storage import in_clause, inserted_id

from . import llm as llm_paths

if TYPE_CHECKING:
    from .parts import HindsightParts


def existing(conn: sqlite3.Connection, ids: Sequence[int]) -> set[int]:
    """Which of ids are facts still in the bank (the mirror may lag a write in progress)."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return set()
    return {r[0] for r in conn.execute(f"SELECT id FROM facts WHERE id IN {in_clause(ids)}", ids)}


def consolidate_fact(hb: HindsightParts, conn: sqlite3.Connection, fact_id: int,
                     vector: np.ndarray, touched: list[int],
                     earlier_ids: Sequence[int] = (), earlier: np.ndarray | None = None) -> None:
    """Fold a new fact into the observation of its nearest near-duplicate from another doc, or
    start one from the pair. With an LLM the observation's new text is the model's; a failed or
    malformed reply, or 'separate', changes nothing."""
    threshold = hb.options.consolidate_threshold
    index = hb.bank.sync(conn)
    doc_id, text = conn.execute("SELECT doc_id, text FROM facts WHERE id = ?", (fact_id,)).fetchone()
    pairs: list[tuple[int, float]] = []
    if index is not None and len(index):
        found, scores = index.search(vector, 5)
        pairs = [(i, s) for i, s in zip(found, scores) if s >= threshold]
    if earlier is not None and len(earlier_ids):  # this write's earlier facts: not in the mirror
        sims = earlier[:len(earlier_ids)] @ vector
        pairs += [(earlier_ids[j], float(sims[j])) for j in np.flatnonzero(sims >= threshold).tolist()]
    alive = existing(conn, [i for i, _ in pairs])
    candidates = []
    for other, _score in sorted(pairs, key=lambda p: -p[1]):
        if other == fact_id or other not in alive:
            continue
        row = conn.execute("SELECT doc_id, kind, text FROM facts WHERE id = ?", (other,)).fetchone()
        if row[0] == doc_id:
            continue
        candidates.append((other, row))
    if not candidates:
        return
    other, (other_doc, other_kind, other_text) = candidates[0]
    obs: int | None
    if other_kind == "observation":
        obs = other
    else:
        row = conn.execute("SELECT obs_id FROM observation_support WHERE fact_id = ? LIMIT 1",
                           (other,)).fetchone()
        obs = row[0] if row else None
    if obs is not None and conn.execute("SELECT 1 FROM observation_support WHERE obs_id = ? AND "
                                        "fact_id = ?", (obs, fact_id)).fetchone():
        return
    current = other_text if obs is None else conn.execute(
        "SELECT text FROM facts WHERE id = ?", (obs,)).fetchone()[0]
    new_text, new_vector = text, vector  # offline: the latest phrasing of the facet
    if hb.llm is not None:
        decision = llm_paths.consolidate(hb.llm, current, text)
        if decision is None or decision.action == "separate":
            return
        new_text = decision.text.strip()
        new_vector = retrieval.embed_documents(hb.embedder, [new_text], hb.cache)[0]
    if obs is None:
        obs = _create(hb, conn, hb.clock(), new_text, new_vector, [other, fact_id])
    else:
        conn.execute("INSERT INTO observation_support VALUES (?, ?) ON CONFLICT DO NOTHING", (obs, fact_id))
        if new_text != current:
            _set_text(hb, conn, obs, new_text, new_vector, hb.clock())
    _refresh(conn, obs)
    touched.append(obs)


def _create(hb: HindsightParts, conn: sqlite3.Connection, now: float, text: str, vector: np.ndarray,
            support: list[int]) -> int:
    obs = inserted_id(conn.execute(
        "INSERT INTO facts (doc_id, text, kind, occurred_start, occurred_end, dated, mentioned_at, "
        "created_at, position) VALUES (NULL, ?, 'observation', 0, 0, 0, 0, ?, 0)", (text, now)))
    hb.bank.index_text(conn, obs, text, "")
    conn.execute("INSERT INTO vectors (id, vec) VALUES (?, ?)",
                 (obs, np.asarray(vector, dtype=np.float32).tobytes()))
    conn.executemany("INSERT INTO observation_support VALUES (?, ?) ON CONFLICT DO NOTHING",
                     [(obs, f) for f in support])
    conn.execute("INSERT INTO observation_history VALUES (?, 1, ?, ?)", (obs, text, now))
    return obs


def _set_text(hb: HindsightParts, conn: sqlite3.Connection, obs: int, text: str, vector: np.ndarray,
              now: float) -> None:
    old, version = conn.execute("SELECT text, version FROM facts WHERE id = ?", (obs,)).fetchone()
    hb.bank.unindex_text(conn, obs, old, "")
    conn.execute("UPDATE facts SET text = ?, version = ? WHERE id = ?", (text, version + 1, obs))
    hb.bank.index_text(conn, obs, text, "")
    conn.execute("INSERT INTO vectors (id, vec) VALUES (?, ?) "
                 "ON CONFLICT (id) DO UPDATE SET vec = excluded.vec",
                 (obs, np.asarray(vector, dtype=np.float32).tobytes()))
    conn.execute("INSERT INTO observation_history VALUES (?, ?, ?, ?) ON CONFLICT (obs_id, version) "
                 "DO UPDATE SET text = excluded.text, changed_at = excluded.changed_at",
                 (obs, version + 1, text, now))


def _refresh(conn: sqlite3.Connection, obs: int) -> None:
    """Times, evidence (distinct source docs), entities and tags of an observation from its
    supporting facts; the supporters share its evidence count."""
    support = [r[0] for r in conn.execute("SELECT fact_id FROM observation_support WHERE obs_id = ?", (obs,))]
    marks = in_clause(support)
    start, end, dated, mentioned, sources = conn.execute(
        f"SELECT MIN(occurred_start), MAX(occurred_end), MAX(dated), MAX(mentioned_at), "
        f"COUNT(DISTINCT doc_id) FROM facts WHERE id IN {marks}", support).fetchone()
    conn.execute("UPDATE facts SET occurred_start = ?, occurred_end = ?, dated = ?, mentioned_at = ?, "
                 "sources = ? WHERE id = ?", (start, end, dated, mentioned, sources, obs))
    conn.execute(f"UPDATE facts SET sources = ? WHERE id IN {marks}", (sources, *support))
    conn.execute("DELETE FROM fact_entities WHERE fact_id = ?", (obs,))
    conn.execute(f"INSERT INTO fact_entities SELECT ?, entity_id FROM fact_entities "
                 f"WHERE fact_id IN {marks} ON CONFLICT DO NOTHING", (obs, *support))
    conn.execute("DELETE FROM fact_tags WHERE fact_id = ?", (obs,))
    conn.execute(f"INSERT INTO fact_tags SELECT ?, tag FROM fact_tags WHERE fact_id IN {marks} ON CONFLICT DO NOTHING",
                 (obs, *support))


def remove_facts(hb: HindsightParts, conn: sqlite3.Connection, ids: Sequence[int],
                 touched: list[int]) -> None:
    """Remove facts exactly (text, vector, links, entities, tags). An observation they supported
    is removed when fewer than two facts still support it, else re-worded from its newest
    remaining fact, so nothing of a deleted doc stays recallable."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return
    affected: set[int] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = in_clause(chunk)
        affected |= {r[0] for r in conn.execute(
            f"SELECT obs_id FROM observation_support WHERE fact_id IN {marks}", chunk)}
        for fact_id, text, doc_id, context in conn.execute(
                f"SELECT id, text, doc_id, context FROM facts WHERE id IN {marks}", chunk).fetchall():
            hb.bank.unindex_text(conn, fact_id, text, context)
            if doc_id is not None:  # observations do not count as mentions
                conn.execute("UPDATE entities SET mentions = mentions - 1 WHERE id IN "
                             "(SELECT entity_id FROM fact_entities WHERE fact_id = ?)", (fact_id,))
        for table, column in (("facts", "id"), ("vectors", "id"), ("links", "src"), ("links", "dst"),
                              ("fact_entities", "fact_id"), ("fact_tags", "fact_id"),
                              ("observation_support", "fact_id"), ("observation_support", "obs_id"),
                              ("observation_history", "obs_id")):
            conn.execute(f"DELETE FROM {table} WHERE {column} IN {marks}", chunk)
    touched.extend(ids)
    gone = [r[0] for r in conn.execute("SELECT id FROM entities WHERE mentions <= 0")]
    if gone:
        conn.execute(f"DELETE FROM entity_words WHERE alias IN (SELECT alias FROM entity_aliases "
                     f"WHERE entity_id IN {in_clause(gone)})", gone)
        conn.execute(f"DELETE FROM entity_aliases WHERE entity_id IN {in_clause(gone)}", gone)
        conn.execute(f"DELETE FROM fact_entities WHERE entity_id IN {in_clause(gone)}", gone)
        conn.execute(f"DELETE FROM entities WHERE id IN {in_clause(gone)}", gone)
    lonely = []
    for obs in sorted(affected - set(ids)):
        support = conn.execute("SELECT f.id, f.text FROM observation_support s JOIN facts f ON "
                               "f.id = s.fact_id WHERE s.obs_id = ? ORDER BY f.id DESC", (obs,)).fetchall()
        if len(support) < 2:
            lonely.append(obs)
            continue
        newest_id, newest_text = support[0]
        vector = hb.bank.vectors(conn, [newest_id])[newest_id]
        _set_text(hb, conn, obs, newest_text, vector, hb.clock())
        _refresh(conn, obs)
        touched.append(obs)
    if lonely:
        conn.execute(f"UPDATE facts SET sources = 1 WHERE id IN (SELECT fact_id FROM "
                     f"observation_support WHERE obs_id IN {in_clause(lonely)})", lonely)
        remove_facts(hb, conn, lonely, touched)
