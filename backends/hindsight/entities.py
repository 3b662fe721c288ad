"""Entity resolution: a new name joins an existing entity (name similarity, co-occurring
entities, recency) or becomes a new one; never a duplicate of the same key."""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Sequence

from backends.storage import in_clause, inserted_id

SIMILAR = 0.7  # name similarity below which an entity is not a candidate at all
MERGE_SCORE = 0.8  # combined score at or above which a new name is an existing entity
_PUNCT = re.compile(r"[^\w\s./\-]")
DAY = 86400.0


def entity_key(name: str) -> str:
    """Lower-case, possessive and punctuation dropped, spaces collapsed: 'Mel's ' -> 'mel'."""
    name = re.sub(r"['’]s\b", "", name.strip())
    return " ".join(_PUNCT.sub(" ", name.lower()).split())


@lru_cache(maxsize=4096)
def _chars(name: str) -> Counter:
    """A name's characters counted (names recur: the new name against each candidate, and a
    project's aliases against every new name)."""
    return Counter(name)


def name_similarity(a: str, b: str) -> float:
    """1.0 equal; 0.9 when one name's words are all in the other ('Caroline' in 'Caroline Lee');
    0.75 for a short form of a one-word name ('Mel' of 'Melanie'); else the character ratio
    (0.0 when it is surely below SIMILAR)."""
    if a == b:
        return 1.0
    wa, wb = a.split(), b.split()
    if set(wa) <= set(wb) or set(wb) <= set(wa):
        return 0.9
    if len(wa) == len(wb) == 1 and min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)):
        return 0.75
    # SequenceMatcher's own upper bounds (real_quick_ratio: the lengths; quick_ratio: the
    # shared characters), computed before building one: most candidates stop here, and
    # building a matcher cost more than the bounds.
    total = len(a) + len(b)
    if 2 * min(len(a), len(b)) / total < SIMILAR:
        return 0.0
    if 2 * sum((_chars(a) & _chars(b)).values()) / total < SIMILAR:
        return 0.0
    return SequenceMatcher(None, a, b).ratio()


class Resolver:
    """Resolves names inside one write transaction; `resolve` returns entity ids."""

    def __init__(self, conn: sqlite3.Connection, now: float):
        self.conn, self.now = conn, now
        self._by_key: dict[str, int] = {}

    def resolve(self, names: Sequence[str], when: float) -> list[int]:
        """Entity ids for the names of one fact (the other names are its co-occurring context)."""
        named: dict[str, str] = {}
        for name in names:
            named.setdefault(entity_key(name), name)
        named.pop("", None)
        keys = list(named)
        ids: list[int] = []
        for key, name in named.items():
            entity_id = self._by_key.get(key) or self._alias(key)
            if entity_id is None:
                entity_id = self._match(key, [k for k in keys if k != key], when)
            if entity_id is None:
                cur = self.conn.execute(
                    "INSERT INTO entities (name, key, first_seen, last_seen, mentions) "
                    "VALUES (?, ?, ?, ?, 0)", (name.strip(), key, when, when))
                entity_id = inserted_id(cur)
            self.conn.execute("INSERT INTO entity_aliases VALUES (?, ?) ON CONFLICT DO NOTHING", (key, entity_id))
            self.conn.executemany("INSERT INTO entity_words VALUES (?, ?) ON CONFLICT DO NOTHING",
                                  [(word, key) for word in key.split()])
            self._by_key[key] = entity_id
            if entity_id not in ids:
                ids.append(entity_id)
        return ids

    def _alias(self, key: str) -> int | None:
        row = self.conn.execute("SELECT entity_id FROM entity_aliases WHERE alias = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    def _match(self, key: str, context: list[str], when: float) -> int | None:
        """The best existing entity for an unseen name, if it scores high enough: name
        similarity, plus entities seen with both, plus having been seen lately."""
        words = key.split()
        prefix = words[0][:3]
        rows = self.conn.execute(  # names starting alike, and names sharing a word (both indexed)
            "SELECT a.alias, e.id, e.last_seen FROM entity_aliases a JOIN entities e ON e.id = a.entity_id "
            "WHERE (a.alias >= ? AND a.alias < ?) OR a.alias IN (SELECT alias FROM entity_words WHERE "
            f"word IN {in_clause(words)}) LIMIT 200", (prefix, prefix + "\uffff", *words)).fetchall()
        best, best_score = None, 0.0
        context_ids = [i for i in (self._by_key.get(k) or self._alias(k) for k in context) if i]
        for alias, entity_id, last_seen in rows:
            similarity = name_similarity(key, alias)
            if similarity < SIMILAR:
                continue
            score = similarity + (0.05 if abs(when - last_seen) < 30 * DAY else 0.0)
            if score + 0.1 < max(best_score, MERGE_SCORE):
                continue  # even full co-occurrence leaves it out: skip the costly count
            score += 0.1 * self._cooccurrence(entity_id, context_ids)
            if score > best_score:
                best, best_score = entity_id, score
        return best if best_score >= MERGE_SCORE else None

    def _cooccurrence(self, entity_id: int, others: list[int]) -> float:
        """Share of the context entities already seen in a fact with this entity (0-1)."""
        if not others:
            return 0.0
        distinct = list(dict.fromkeys(others))
        ids = [entity_id, *distinct]
        mentions = dict(self.conn.execute(
            f"SELECT id, mentions FROM entities WHERE id IN {in_clause(ids)}", ids).fetchall())
        shared = 0
        for other in distinct:
            # One pair at a time, walking the facts of whichever is mentioned less: one query
            # over a common entity's facts (a project's name is in most) cost milliseconds.
            walk, probe = sorted((entity_id, other), key=lambda i: (mentions.get(i, 0), i))
            shared += self.conn.execute(
                "SELECT 1 FROM fact_entities x JOIN fact_entities y ON y.fact_id = x.fact_id "
                "AND y.entity_id = ? WHERE x.entity_id = ? LIMIT 1", (probe, walk)).fetchone() is not None
        return shared / len(others)

    def link(self, fact_id: int, entity_ids: Sequence[int], when: float) -> None:
        for entity_id in entity_ids:
            self.conn.execute("INSERT INTO fact_entities VALUES (?, ?) ON CONFLICT DO NOTHING", (fact_id, entity_id))
            self.conn.execute("UPDATE entities SET mentions = mentions + 1, last_seen = CASE WHEN last_seen < ? "
                              "THEN ? ELSE last_seen END WHERE id = ?", (when, when, entity_id))
