"""A process that holds a derived backend open (hipporag's graph, hindsight's facts,
sliding_window's summaries), as `middle run` does between turns, sees on its next recall what
another process changed: `middle memory add|edit|delete|supersede|pin|undo` run as a process of
its own, and a doc another program (the sqlite3 shell, psql) added, rewrote or deleted in the
store, which the store's triggers log and the backend catches up on doc by doc
(backends.rederive.CatchesUp), with no `middle memory reindex`. On SQLite and on PostgreSQL:
every backend x every change kind x both engines, each case its own project, the holder a real
process (tests/backends/memory_holder.py), the change made by another."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import outside_sql  # tests/outside_sql.py
import pytest

from orchestrator.config.settings import load_config
from orchestrator.memory.curation import Curator
from orchestrator.services import Services
from orchestrator.testing import make_repo

PROJECT = "demo"
BACKENDS = ["hipporag", "hindsight", "sliding_window"]
ENGINES = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
HOLDER = Path(__file__).with_name("memory_holder.py")

DOCS = ["Deploys run on Tuesday after the release freeze.",
        "Exports write CSV files with a header row.",
        "The billing service retries failed card charges three times.",
        "Logs are shipped to the central collector every minute.",
        "Feature flags live in the flags yaml file of the settings repository."]
NEW = "Nightly backups of the ledger database rotate every Sunday at midnight."
EDITED = "Exports now write Parquet archives into the warehouse bucket."
SUPERSEDING = "Deploys run on Thursday now, after the release freeze, amended from Tuesday."


def ident(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


@pytest.fixture(params=ENGINES)
def url(request: pytest.FixtureRequest) -> str | None:
    return request.getfixturevalue("pg_url") if request.param == "postgres" else None


def _project(root: Path, backend: str, url: str | None) -> Path:
    make_repo(root / "repo")
    options = "" if backend == "sliding_window" else '[memory.options]\nembedder = "hashing"\n'
    (root / "middle.toml").write_text(
        f'[project]\nid = "{PROJECT}"\npath = "repo"\n'
        f'[memory]\nsave_dir = ".middle/memory"\nbackend = "{backend}"\n'
        + (f'url = "{url}"\n' if url else "") + options)
    return root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    return env


class Holder:
    """The process that keeps the project's memory open (memory_holder.py)."""

    def __init__(self, root: Path):
        self.proc = subprocess.Popen([sys.executable, str(HOLDER), PROJECT], cwd=root, env=_env(root),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        assert first.strip() == "ready", self._said()

    def recall(self, query: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"recall {query}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self._said()
        answer = json.loads(line)
        assert "error" not in answer, answer["error"]
        return answer

    def _said(self) -> str:
        self.proc.kill()
        return self.proc.communicate(timeout=30)[1][-3000:]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Any]:
    """seeded(backend, url, forget=None) -> the project's folder with DOCS in memory (each added
    as `middle memory add` adds it; `forget`: then that doc forgotten, as change 6)."""
    services: list[Services] = []

    def make(backend: str, url: str | None, forget: str | None = None) -> Path:
        root = _project(tmp_path / "project", backend, url)
        cwd = Path.cwd()
        os.chdir(root)  # the config's relative paths, as the CLI reads them
        try:
            svc = Services(load_config(root / "middle.toml"))
            services.append(svc)
            curator: Curator = svc.curator()
            for doc in DOCS:
                curator.add(PROJECT, doc, "test")
            if forget is not None:
                assert curator.forget(PROJECT, ident(forget), "test").change == len(DOCS) + 1
            assert svc.memory is not None
            svc.memory.flush()
        finally:
            os.chdir(cwd)
        svc.close()
        return root

    yield make
    for svc in services:
        svc.close()


def middle(root: Path, *args: str) -> str:
    """`middle memory ARGS` as a process of its own (another terminal)."""
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "memory", *args], cwd=root,
                          env=_env(root), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    return done.stdout


def related(answer: dict[str, Any]) -> list[str]:
    """The block's memory lines (after `Memories invoked:`)."""
    return answer["block"].splitlines()[1:]


def first(answer: dict[str, Any], backend: str) -> str:
    """What the recall put first: the top doc of a relevance backend; sliding_window ranks
    nothing, so its whole block stands for it."""
    return answer["block"] if backend == "sliding_window" else answer["docs"][0]


# --- changes made through middle, in another process ----------------------------------------

# kind -> (the doc forgotten first, if any; the CLI's arguments; the query; a check of the
# recall before the change and one after it)
MIDDLE_CHANGES: dict[str, Any] = {
    "add": (None, ["add", NEW], "ledger database backups",
            lambda a, b: NEW not in a["block"], lambda a, b: NEW in first(a, b)),
    "edit": (None, ["edit", ident(DOCS[1]), "--text", EDITED], "Parquet archives warehouse bucket",
             lambda a, b: EDITED not in a["block"] and DOCS[1] in a["block"],
             lambda a, b: EDITED in first(a, b) and DOCS[1] not in a["block"]),
    "forget": (None, ["delete", ident(DOCS[2])], "billing card charges retries",
               lambda a, b: DOCS[2] in a["block"], lambda a, b: DOCS[2] not in a["block"]),
    "supersede": (None, ["supersede", ident(DOCS[0]), "--with", SUPERSEDING], "deploys release freeze",
                  lambda a, b: SUPERSEDING not in a["block"],
                  lambda a, b: SUPERSEDING in a["block"] and f"superseded by [{ident(SUPERSEDING)}]" in a["block"]),
    "pin": (None, ["pin", ident(DOCS[3])], "billing card charges retries",
            lambda a, b: not related(a)[0].startswith(f"[{ident(DOCS[3])}] {DOCS[3]}"),
            lambda a, b: related(a)[0].startswith(f"[{ident(DOCS[3])}] {DOCS[3]}")),
    "undo": (DOCS[4], ["undo", str(len(DOCS) + 1)], "feature flags yaml settings repository",
             lambda a, b: DOCS[4] not in a["block"], lambda a, b: DOCS[4] in first(a, b)),
}


@pytest.mark.parametrize("kind", list(MIDDLE_CHANGES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_next_recall_sees_what_another_middle_process_changed(backend, kind, url, seeded):
    forget, args, query, before, after = MIDDLE_CHANGES[kind]
    root = seeded(backend, url, forget)
    holder = Holder(root)
    try:
        seen = holder.recall(query)
        assert before(seen, backend), seen
        middle(root, *args)
        seen = holder.recall(query)
        assert after(seen, backend), seen
    finally:
        holder.close()


# --- docs another program wrote in the store -------------------------------------------------

# kind -> (the doc written, the doc it replaces or deletes, the query, checks before and after)
OUTSIDE_CHANGES = {
    "add": (NEW, None, "ledger database backups",
            lambda a, b: NEW not in a["block"], lambda a, b: NEW in first(a, b)),
    "edit": (EDITED, DOCS[1], "Parquet archives warehouse bucket", lambda a, b: EDITED not in a["block"],
             lambda a, b: EDITED in first(a, b) and DOCS[1] not in a["block"]),
    "forget": (None, DOCS[2], "billing card charges retries",
               lambda a, b: DOCS[2] in a["block"], lambda a, b: DOCS[2] not in a["block"]),
}


@pytest.mark.parametrize("kind", list(OUTSIDE_CHANGES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_next_recall_sees_what_another_program_wrote(backend, kind, url, seeded):
    text, old, query, before, after = OUTSIDE_CHANGES[kind]
    root = seeded(backend, url)
    holder = Holder(root)
    try:
        seen = holder.recall(query)
        assert before(seen, backend), seen
        target = url or str(root / ".middle" / "memory" / PROJECT / f"{backend}.sqlite3")
        outside_sql.write(target, backend, kind, old, text, PROJECT)
        seen = holder.recall(query)
        assert after(seen, backend), seen
    finally:
        holder.close()
