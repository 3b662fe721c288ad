"""Bulk curation: forget or supersede every doc a filter picks, as one change undone as one.

`middle memory delete --source commit --before 2025-01-01` (or `supersede ... --with TEXT`)
picks docs by where they came from, their ticket, their time and their words; the CLI shows
them and asks once (`--yes` skips the question); the change is one `bulk` entry in the record
that keeps every doc's text, time and state, so `middle memory undo N` puts them all back (Curator._undo_bulk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from orchestrator.errors import MemoryStoreError
from orchestrator.killpoints import point
from orchestrator.memory.curation import SOURCE_KINDS, CurationError, Outcome, short
from orchestrator.memory.format import DOC_ID_CHARS, doc_id
from orchestrator.memory.timeline import parse_when

if TYPE_CHECKING:
    from orchestrator.memory.catalog import Catalog
    from orchestrator.memory.curation import Curator
    from tickets.curation import MemoryState


class DocFilter(BaseModel):
    """Which docs a bulk change takes: every given field must match (all of them: AND).
    `before`/`after`: the doc's own time where the backend keeps one (a commit's date, a
    ticket's completion), else when it entered memory; a bare date is that day's start (UTC)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source: str | None = None
    ticket: str | None = None
    before: str | None = None
    after: str | None = None
    containing: str | None = None

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str | None) -> str | None:
        if value == "":
            return None  # an empty option is no filter (DocFilter.empty says so)
        if value is not None and value not in SOURCE_KINDS:
            raise ValueError(f"--source {value!r} is none of {', '.join(SOURCE_KINDS)}")
        return value

    @field_validator("before", "after")
    @classmethod
    def _a_date(cls, value: str | None, info: Any) -> str | None:
        return None if value in (None, "") else parse_when(str(value), f"--{info.field_name}")

    @classmethod
    def of(cls, **given: str | None) -> DocFilter:
        """The filter from the CLI's or the API's fields; one CurationError for a bad one."""
        try:
            return cls(**given)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise CurationError(str(first.get("ctx", {}).get("error") or first["msg"])) from None

    def empty(self) -> bool:
        return not any(v not in (None, "") for v in self.model_dump().values())

    def words(self) -> str:
        """The filter as a person reads it (history, the confirmation)."""
        parts = [f"{name} {value[:19] if name in ('before', 'after') else value!r}"
                 for name, value in self.model_dump().items() if value not in (None, "")]
        return ", ".join(parts)


def select(curator: Curator, project_id: str, flt: DocFilter) -> list[str]:
    """The project's docs the filter picks, oldest first; an empty filter is refused (it
    would pick every doc: say so with a filter, not by accident)."""
    _refuse_empty(flt)
    store = curator.store
    texts, times = _listing(curator, project_id)
    if not texts:
        return []
    states = curator.states(project_id)
    sources = store.doc_sources(project_id)
    picked = []
    for text in texts:
        tickets = list(sources.get(text, []))
        if flt.source and source_kind(states.get(doc_id(text)), tickets) != flt.source:
            continue
        if flt.ticket and not any(t["ticket_id"] == flt.ticket for t in tickets):
            continue
        if flt.containing and flt.containing.lower() not in text.lower():
            continue
        when = times.get(text) or entered_at(text, states, tickets)
        if (flt.before or flt.after) and when is None:
            continue  # no time known: no date filter can say it matches
        if flt.before and not when < flt.before:  # type: ignore[operator]
            continue
        if flt.after and not when >= flt.after:  # type: ignore[operator]
            continue
        picked.append(text)
    return picked


def _refuse_empty(flt: DocFilter) -> None:
    if flt.empty():
        raise CurationError("give at least one filter (--source, --ticket, --before, --after, "
                            "--containing) to pick docs: an empty filter would pick every doc")


def select_kept(catalog: Catalog, flt: DocFilter, keeps_times: bool) -> list[tuple[str, str]]:
    """What `select` picks, as (text, id) pairs oldest first, read from a server's kept catalog
    (memory.catalog: caught up with every write by the change log) instead of listing the
    store: each page of `GET .../memory/bulk` at 100,000 docs is one pass over rows in memory.
    `keeps_times`: the backend's own times count (as `doc_times` reads them)."""
    _refuse_empty(flt)
    before = _epoch(flt.before) if flt.before else None
    after = _epoch(flt.after) if flt.after else None
    needle = flt.containing.lower() if flt.containing else None
    picked = []
    for row in sorted(catalog.rows, key=lambda r: r.pos):
        if flt.source and row.source != flt.source:
            continue
        if flt.ticket and flt.ticket not in row.tickets:
            continue
        if needle is not None and needle not in row.text.lower():
            continue
        if before is not None or after is not None:
            when = row.stamp if keeps_times and row.stamp is not None else None
            if when is None:
                entered = entered_at(row.text, catalog.states, list(catalog.sources.get(row.text) or []))
                when = _epoch(entered) if entered else None
            if when is None:
                continue  # no time known: no date filter can say it matches
            if before is not None and not when < before:
                continue
            if after is not None and not when >= after:
                continue
        picked.append((row.text, row.key))
    return picked


def _epoch(stamp: str) -> float | None:
    from datetime import datetime, timezone

    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:  # stored state is untrusted: an unreadable date is no date
        return None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def selection_token(docs: list[str]) -> str:
    """What a person confirms a bulk change on (the API and the board): a digest of the docs the
    filter picked when they looked. The change is refused when the filter picks others by then."""
    return token_of_ids([doc_id(d) for d in docs])


def token_of_ids(ids: list[str]) -> str:
    """`selection_token` from the docs' full ids (a kept catalog has them: no hashing of texts)."""
    import hashlib

    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def page_of(docs: list[str], limit: int, cursor: str | None) -> tuple[list[str], str | None]:
    """One page of a selection (oldest first) after `cursor` (the last id shown), and the next
    cursor (None on the last page)."""
    shown, next_cursor = page_of_keyed([(d, doc_id(d)) for d in docs], limit, cursor)
    return [text for text, _ in shown], next_cursor


def page_of_keyed(picked: list[tuple[str, str]], limit: int,
                  cursor: str | None) -> tuple[list[tuple[str, str]], str | None]:
    """`page_of` over (text, full id) pairs: the cursor found by the ids, no text hashed."""
    start = 0
    if cursor:
        at = next((i for i, (_, key) in enumerate(picked) if key[:DOC_ID_CHARS] == cursor), None)
        if at is None:
            raise CurationError(f"cursor {cursor!r} is no doc of this selection any more (the "
                                "docs changed): start again from the first page")
        start = at + 1
    shown = picked[start:start + limit]
    more = start + limit < len(picked)
    return shown, short(shown[-1][1]) if shown and more else None


def source_kind(state: Any, tickets: list[Any]) -> str:
    """Where a doc came from, one of SOURCE_KINDS (as the board's catalog says it)."""
    kind = "ticket" if tickets else str(((state or {}).get("origin") or {}).get("kind") or "unknown")
    return kind if kind in SOURCE_KINDS else "unknown"


def _listing(curator: Curator, project_id: str) -> tuple[list[str], dict[str, str]]:
    """Every doc, oldest first, and each doc's own time as ISO UTC text where the backend keeps
    times: one listing of the store (list_records gives both), not one for each."""
    from datetime import datetime, timezone

    facade = curator.facade
    if not facade.backend_cls.keeps_times or not facade.has_store(project_id):
        return facade.list_docs(project_id), {}
    with facade.using(project_id, "lookup") as backend:
        try:
            records = list(backend.list_records())
        except NotImplementedError as exc:  # as facade.list_docs says it: one error line
            raise MemoryStoreError(f"{exc}; use `middle memory search` instead") from None
    times = {text: datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="microseconds")
             for text, when in records if when is not None}
    return [text for text, _ in records], times


def entered_at(text: str, states: Any, tickets: list[Any]) -> str | None:
    """When a doc entered memory: its first ticket record, else its recorded addition."""
    times = [t["indexed_at"] for t in tickets if t.get("indexed_at")]
    state = states.get(doc_id(text))
    if state is not None and state.get("added_at"):
        times.append(state["added_at"])
    return min(times) if times else None


def forget_all(curator: Curator, project_id: str, docs: list[str], who: str, words: str) -> Outcome:
    """Delete every doc of `docs` from memory as one change (its record keeps each doc's
    text, time and state: one undo puts them all back). Recorded first, deleted last: a kill
    between leaves the docs in memory, and the same command run again deletes them under the
    change already recorded (deleted first, a kill would lose what the undo puts back)."""
    if not docs:
        raise CurationError("no doc matches the filter: nothing was changed")
    facade, store = curator.facade, curator.store
    with facade.project_lock(project_id, "delete"):
        last = curator._last_change(project_id, doc_id(docs[0]))
        if (last is not None and last["action"] == "bulk" and last["undone_by"] is None
                and (last["after"] or {}).get("action") == "forget"
                and set(docs) <= {i.get("doc") for i in (last["before"] or {}).get("docs", [])}):
            facade.delete(project_id, docs)  # killed after recording it: finished now
            return Outcome(last["id"], docs[0], message=f"deleted {len(docs)} docs")
        # each doc's own time, looked up doc by doc (a bulk change of 10 docs reads 10 rows,
        # not the store), so the undo puts each back at its time
        times = facade.doc_times(project_id, docs)
        states = curator.states(project_id, [doc_id(d) for d in docs])
        items = [{"doc": d, "doc_id": doc_id(d), "time": times.get(d),
                  "state": dict(states[doc_id(d)]) if doc_id(d) in states else None} for d in docs]
        for doc in docs:
            store.set_memory_docs_deleted(project_id, doc, True)
        change = store.record_memory_change(
            project_id, "bulk", doc_id(docs[0]), who=who, before={"docs": items},
            after={"action": "forget", "filter": words},
            drop=[doc_id(d) for d in docs if doc_id(d) in states])
        point("memory.recorded")
        facade.delete(project_id, docs)
    return Outcome(change, docs[0], message=f"deleted {len(docs)} docs")


def supersede_all(curator: Curator, project_id: str, docs: list[str], text: str, who: str,
                  words: str) -> Outcome:
    """Index `text` once as the doc that replaces every doc of `docs` not superseded yet
    (each kept, marked, ranked right below it), as one change."""
    new = curator._new_text(text)
    facade, store = curator.facade, curator.store
    with facade.project_lock(project_id, "supersede"):
        states = curator.states(project_id, [doc_id(d) for d in docs])
        live = [d for d in docs if doc_id(d) not in states or not states[doc_id(d)]["superseded_by"]]
        if not live:
            raise CurationError("no doc the filter picks is left to supersede (each was "
                                "superseded already, or none matches): nothing was changed")
        if facade.has_doc(project_id, new) and not curator._unrecorded(project_id, new):
            raise CurationError(f"a doc with that text is in memory already ({short(doc_id(new))}): "
                                "give the new wording")
        if not facade.has_doc(project_id, new):  # (else a bulk supersede killed before its record)
            curator._intend(project_id, new, "supersede", who)
            facade.index(project_id, [new])
            point("memory.curated")
        items = [{"doc": d, "doc_id": doc_id(d),
                  "state": dict(states[doc_id(d)]) if doc_id(d) in states else None} for d in live]
        put: list[MemoryState] = [{**(states.get(doc_id(d)) or curator._new_state(d, None, who)),
                                   "superseded_by": doc_id(new)} for d in live]
        put.append(curator._new_state(new, {"kind": "supersede", "of": doc_id(live[0]),
                                            "count": len(live)}, who))
        change = store.record_memory_change(
            project_id, "bulk", doc_id(new), who=who, before={"docs": items},
            after={"action": "supersede", "by": doc_id(new), "doc": new, "filter": words},
            put=put)
    return Outcome(change, new, message=f"superseded {len(live)} docs")

