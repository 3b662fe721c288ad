"""`middle bench memory-page`: the board's Memory page and the docs API as the store grows.

For each size (20, 3,000 and 100,000 docs by default) one project memory (bm25: no model) is
filled with that many docs, a tenth of them with an origin and an author, some pinned and some
superseded (`fill_memory`, shared with the tests), and the server is asked in process (no
network) for: the Memory page (its bytes; its server time when the listing is built, and when
it is kept), the next page by its cursor, a filtered page, the docs API's first page, and the
first page after a write: one doc added by hand, then one pinned (the kept listing catches up
with the write instead of being built again). A page must stay about the same size at 100,000
docs as at 20.

Then the lookups by id and the bulk selection: one doc shown by its 8-character id over the API
(`GET .../memory/docs/ID`, what `middle memory show ID` does) and by the CLI's lookup
(`Curator.find`, the one `pin|unpin|edit|delete|supersede ID` share), and the first and the
next page of a bulk selection (`GET .../memory/bulk?source=commit`).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click

PROJECT = "calc"
SIZES = (20, 3_000, 100_000)
AUTHORS = ("alice <alice@example.org>", "bob <bob@example.org>")
KINDS = ("commit", "file", "hand", "api")


def doc_text(i: int) -> str:
    """The i-th synthetic doc: a ticket-like line, distinct for every i."""
    return (f"Ticket: Task {i}. Changed module m{i % 97} and file src/f{i % 1013}.py; "
            f"the check {i * 7919 % 100_003} passes.")


def origin_of(i: int) -> tuple[str, str] | None:
    """The origin kind and author doc i gets from `fill_memory` (every 10th doc; kinds and
    authors cycle independently, so filters on both select a real intersection)."""
    if i % 10:
        return None
    return KINDS[(i // 10) % len(KINDS)], AUTHORS[(i // 40) % len(AUTHORS)]


def fill_memory(mem: Any, store: Any, project: str, start: int, stop: int) -> list[str]:
    """Docs start..stop-1 indexed in one call (the fastest way into a backend), then their
    curation rows written in one transaction each: every 10th doc an origin and an author
    (`origin_of`), every 500th pinned, every 1000th (from 1000) superseded by the doc after it.
    Returns the docs."""
    from orchestrator.memory.format import doc_id
    from tickets.model import utc_now

    docs = [doc_text(i) for i in range(start, stop)]
    mem.index(project, docs)
    by_author: dict[str, list[Any]] = {}
    for i, d in zip(range(start, stop), docs):
        if (origin := origin_of(i)) is not None:
            by_author.setdefault(origin[1], []).append((doc_id(d), d, {"kind": origin[0]}))
    for author, rows in by_author.items():
        store.note_memory_origins(project, rows, author)
    put = []
    now = utc_now()
    for i, d in zip(range(start, stop), docs):
        pinned, superseded = i % 500 == 0, i % 1000 == 0 and i > 0 and i + 1 < stop
        if pinned or superseded:
            origin = origin_of(i)
            put.append({"doc_id": doc_id(d), "doc": d, "pinned": pinned and not superseded,
                        "superseded_by": doc_id(doc_text(i + 1)) if superseded else None,
                        "origin": {"kind": origin[0]} if origin else None,
                        "added_by": origin[1] if origin else AUTHORS[0], "added_at": now})
    if put:
        store.record_memory_change(project, "pin", put[0]["doc_id"], who=AUTHORS[0], put=put)
    return docs


def bench_project(root: Path) -> Any:
    """A config with only a memory (bm25, no model) and a ticket store under `root`."""
    from orchestrator.config.settings import load_config

    root.mkdir(parents=True, exist_ok=True)
    (root / "tickets").mkdir(exist_ok=True)
    (root / "middle.toml").write_text(f'[memory]\nsave_dir = ".middle/memory"\nbackend = "bm25"\n\n'
                                      f'[project]\nid = "{PROJECT}"\n', encoding="utf-8")
    return load_config(root / "middle.toml", environ={})


def measure(sizes: tuple[int, ...] = SIZES, root: Path | None = None) -> list[dict[str, Any]]:
    """One row per size: the page's bytes and server times (see the module docstring)."""
    from fastapi.testclient import TestClient

    from orchestrator.memory.format import doc_id
    from orchestrator.server import create_app

    rows = []
    with tempfile.TemporaryDirectory(prefix="middle-bench-memory-page-") as tmp:
        config = bench_project(Path(root or tmp))
        app = create_app(config)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            state = app.state.middle
            mem, store = state.memory(), state.store
            have = 0
            for size in sorted(sizes):
                fill_memory(mem, store, PROJECT, have, size)
                have = size
                page = f"/projects/{PROJECT}/memory"
                cold, first = _timed(client, page)  # the listing built
                warm, again = _timed(client, page, 5)  # the listing kept
                nxt = _next(first.text)
                next_s, _ = _timed(client, page + nxt, 5) if nxt else (0.0, None)
                filtered_s, _ = _timed(client, page + "?source=commit&author=alice&sort=oldest", 5)
                api_s, listed = _timed(client, f"/api/projects/{PROJECT}/memory/docs?limit=20", 5)
                assert first.status_code == 200 and listed.status_code == 200, first.text[:500]
                # one doc added by hand (`middle memory add`), then one pinned: the next page
                # each time (the listing caught up with the write, or built again before)
                curator = state.services.curator()
                curator.add(PROJECT, f"Added by hand at size {size}: the login uses JWT.", AUTHORS[1])
                added_s, after = _timed(client, page)
                assert f"Added by hand at size {size}" in after.text, "the added doc is not on the page"
                curator.pin(PROJECT, doc_text(size // 2 + 1), AUTHORS[1], True)  # not a superseded one
                pinned_s, _ = _timed(client, page + "?pinned=true")
                by_id = doc_id(doc_text(size // 3))[:8]
                show_s, shown = _timed(client, f"/api/projects/{PROJECT}/memory/docs/{by_id}", 5)
                assert shown.status_code == 200 and shown.json()["doc"] == doc_text(size // 3), shown.text[:300]
                find_s = _best(curator.find, (PROJECT, by_id), 5)
                bulk = f"/api/projects/{PROJECT}/memory/bulk?source=commit&limit=20"
                bulk_s, picked = _timed(client, bulk, 5)
                assert picked.status_code == 200, picked.text[:300]
                bulk_next = picked.json()["next_cursor"]
                bulk_next_s, _ = _timed(client, f"{bulk}&cursor={bulk_next}", 5) if bulk_next else (0.0, None)
                rows.append({"docs": size, "page_bytes": len(first.content),
                             "page_built_ms": round(cold * 1000, 1), "page_kept_ms": round(warm * 1000, 1),
                             "next_page_ms": round(next_s * 1000, 1),
                             "filtered_kept_ms": round(filtered_s * 1000, 1),
                             "api_page_bytes": len(listed.content), "api_ms": round(api_s * 1000, 1),
                             "after_add_ms": round(added_s * 1000, 1),
                             "after_pin_ms": round(pinned_s * 1000, 1),
                             "show_by_id_ms": round(show_s * 1000, 1),
                             "find_by_id_ms": round(find_s * 1000, 1),
                             "bulk_page_ms": round(bulk_s * 1000, 1),
                             "bulk_next_ms": round(bulk_next_s * 1000, 1),
                             "same_bytes_kept": len(again.content) == len(first.content)})
    return rows


def _timed(client: Any, url: str, repeat: int = 1) -> tuple[float, Any]:
    """The fastest of `repeat` requests (the machine's other work only ever adds time)."""
    best, response = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        best = min(best, time.perf_counter() - started)
    return best, response


def _best(call: Any, args: tuple[Any, ...], repeat: int) -> float:
    """The fastest of `repeat` calls, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        call(*args)
        best = min(best, time.perf_counter() - started)
    return best


def _next(html: str) -> str | None:
    import re

    found = re.search(r'<a href="([^"]+)" id="next-page"', html)
    return found.group(1).replace("&amp;", "&") if found else None


@click.command(name="memory-page")
@click.option("--sizes", default=",".join(str(s) for s in SIZES), show_default=True,
              help="Store sizes to measure, comma-separated.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def memory_page(sizes: str, as_json: bool) -> None:
    """The Memory page's bytes and server time at each store size."""
    from orchestrator.errors import ConfigError

    try:
        wanted = tuple(int(s) for s in sizes.split(",") if s.strip())
    except ValueError:
        raise ConfigError(f"--sizes must be whole numbers separated by commas, not {sizes!r}") from None
    if not wanted or min(wanted) < 1:
        raise ConfigError("--sizes needs at least one size of 1 or more")
    rows = measure(wanted)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    columns = list(rows[0])
    click.echo(" | ".join(columns))
    for row in rows:
        click.echo(" | ".join(str(row[c]) for c in columns))
