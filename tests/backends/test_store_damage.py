"""Every store file of every backend damaged three ways, then `middle memory search|list` run as a
user runs them (one process each): the docs come back right, or one `error:` line names the file
and the way back, with a non-zero exit. Never an empty memory where there were docs. (The contract
suite checks the same in-process for any backend, plugins' too: see orchestrator.testing.)"""

from __future__ import annotations

import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from backends.retrieval import store as retrieval_store
from orchestrator.testing.damage import DAMAGES, damage_file

REPO = Path(__file__).resolve().parents[2]
KEYWORD_PLUGIN = REPO / "plugins" / "middle-agent-keyword-memory"
GOLDEN = "Golden doc: the login form bug was a missing CSRF token in LoginForm.submit"
DOCS = ["Ticket 1: the database migration adds an index on orders.created_at",
        "Ticket 2: the CSV export quoted commas wrongly in ExportWriter",
        "Ticket 3: the nightly backup job ran twice after the DST switch",
        *(f"Ticket {i}: routine note {i} on build pipeline step Step{i}" for i in range(4, 12)),
        GOLDEN]  # the newest, so recency backends put it first too; 12 vectors fill 4 KiB blocks
EMBEDDER = {"dense", "hybrid", "hipporag", "hindsight"}  # no-model embedder for these


def open_backend(name: str, store_dir: Path):
    if name == "keyword":
        if str(KEYWORD_PLUGIN) not in sys.path:  # this checkout's plugin, as the CLI runs it
            sys.path.insert(0, str(KEYWORD_PLUGIN))
        from middle_agent_keyword_memory import KeywordBackend

        return KeywordBackend(store_dir)
    from orchestrator.plugins.manager import registry as plugin_registry

    registry = plugin_registry()
    options = registry.backend_options(name, {"embedder": "hashing"} if name in EMBEDDER else {})
    return registry.backend_class(name)(store_dir, options)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """name -> a project (middle.toml + a store holding DOCS), built once and copied per case."""
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            root = tmp_path_factory.mktemp(name)
            options = '[memory.options]\nembedder = "hashing"\n' if name in EMBEDDER else ""
            (root / "middle.toml").write_text(
                f'[project]\nid = "demo"\n[memory]\nsave_dir = "mem"\nbackend = "{name}"\n'
                f"{options}")
            previous = retrieval_store.SNAPSHOT_MIN_DOCS
            retrieval_store.SNAPSHOT_MIN_DOCS = 1  # dense and hybrid leave a FAISS snapshot
            try:
                backend = open_backend(name, root / "mem" / "demo")
                for doc in DOCS:  # one by one: doc times in order, for recency backends
                    backend.index([doc])
                backend.close()
            finally:
                retrieval_store.SNAPSHOT_MIN_DOCS = previous
            made[name] = root
        return made[name]

    return make


STORE_FILES = {
    "bm25": ["bm25.sqlite3"],
    "dense": ["dense.sqlite3", "dense.g12.faiss"],
    "hybrid": ["hybrid.sqlite3", "hybrid.g12.faiss"],
    "hipporag": ["hipporag.sqlite3"],
    "hindsight": ["hindsight.sqlite3"],
    "sliding_window": ["sliding_window.sqlite3"],
    "keyword": ["keyword_memory.json"],
}


def cases(names: list[str]) -> list[tuple[str, str, str]]:
    """(backend, store file, way of damage) for every file of each backend named."""
    return [(name, file, how) for name in names for file in STORE_FILES[name] for how in DAMAGES]


# The matrix is split over two modules so that `--dist loadscope` (a module on one worker) runs
# its halves side by side: here the stores with a FAISS snapshot beside their database; every
# store of one file is in test_store_damage_one_file.py. Together: every file of every backend.
CASES = cases([name for name, files in STORE_FILES.items() if len(files) > 1])


def middle(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(KEYWORD_PLUGIN)])
    env["MIDDLE_LOAD_PLUGINS"] = "keyword_memory"  # this test asks for the keyword plugin (entry point)
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "memory", *args], cwd=root,
                         env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def assert_one_error_naming(out: subprocess.CompletedProcess, path: Path) -> None:
    lines = [line for line in out.stderr.strip().splitlines()
             if not line.startswith("note: ")]  # sliding_window's note on recency
    assert out.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert str(path) in lines[0], lines[0]
    assert any(way in lines[0] for way in ("middle memory reindex", "backup")), lines[0]


def test_the_pristine_stores_hold_the_files_damaged_below(pristine):
    for name, files in STORE_FILES.items():
        store = pristine(name) / "mem" / "demo"
        assert sorted(p.name for p in store.iterdir()) == sorted(files), name


@pytest.mark.parametrize("name,file,how", CASES, ids=["-".join(c) for c in CASES])
def test_a_damaged_store_file_is_read_right_or_one_error_naming_it(pristine, tmp_path, name, file,
                                                                    how):
    check_damaged_store(pristine, tmp_path, name, file, how)


def check_damaged_store(pristine, tmp_path: Path, name: str, file: str, how: str) -> None:
    """`file` of backend `name` damaged `how`: search, list (and add, into an emptied file) read
    the docs right or say one error naming the file."""
    root = tmp_path / "project"
    shutil.copytree(pristine(name), root)
    path = root / "mem" / "demo" / file
    damage_file(path, how)
    snapshot = file.endswith(".faiss")
    found = middle(root, "search", "login form bug")  # first: it is what reads the snapshot
    if snapshot:  # a snapshot is a copy of the database's vectors: rebuilt, with a warning
        assert found.returncode == 0, found.stderr
        assert str(path) in found.stderr and "rebuilt" in found.stderr, found.stderr
    if found.returncode == 0:
        first = next(line for line in found.stdout.splitlines() if line.strip())
        assert GOLDEN in first, found.stdout
    else:
        assert_one_error_naming(found, path)
    listed = middle(root, "list")
    if listed.returncode == 0:
        assert "0 doc(s)" not in listed.stderr
        assert [line.split("  ", 1)[1] for line in listed.stdout.splitlines()] == DOCS
    else:
        assert_one_error_naming(listed, path)
    if how == "zero" and not snapshot:  # nothing goes into the emptied file either
        assert middle(root, "add", "written after the damage").returncode != 0
        assert path.stat().st_size == 0


def test_a_store_damaged_where_the_docs_are_intact_is_recovered_by_reindex(pristine, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(pristine("hybrid"), root)
    path = root / "mem" / "demo" / "hybrid.sqlite3"
    with sqlite3.connect(path) as conn:  # a page of the vectors table, not of the docs
        page = conn.execute("SELECT pageno FROM dbstat WHERE name = 'chunks' "
                            "AND pagetype = 'leaf' ORDER BY pageno").fetchone()[0]
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * 4096)
        handle.write(random.Random(7).randbytes(4096))
    for snapshot in path.parent.glob("*.faiss"):
        snapshot.unlink()  # else the vectors come from it, not from the damaged page
    found = middle(root, "search", "login form bug")
    assert_one_error_naming(found, path)
    assert "middle memory reindex --from hybrid" in found.stderr
    rebuilt = middle(root, "reindex", "--from", "hybrid")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert f"rebuilt the hybrid store: {len(DOCS)} doc(s)" in rebuilt.stdout
    again = middle(root, "search", "login form bug")
    assert again.returncode == 0 and GOLDEN in again.stdout.splitlines()[0], again.stderr
    listed = middle(root, "list").stdout.splitlines()
    assert [line.split("  ", 1)[1] for line in listed] == DOCS


# -- issue 29: a damaged store is refused for writes too, and its error's advice works -----------

SQLITE_STORES = ["bm25", "dense", "hybrid", "hipporag", "hindsight", "sliding_window"]
# A page the `add` of a doc neither reads nor writes: damage there once let `add` exit 0 (with a
# warning when closing the store, or nothing) while the store read as damaged.
UNTOUCHED_TABLE = {"dense": "chunks", "hybrid": "chunks", "hipporag": "passage_chunks"}


def damage_page(path: Path, table: str) -> None:
    """One 4 KiB block of garbage over the first leaf page of `table`."""
    with sqlite3.connect(path) as conn:
        page = conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' "
                            "ORDER BY pageno", (table,)).fetchone()[0]
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * 4096)
        handle.write(random.Random(f"{table}-{page}").randbytes(4096))


@pytest.mark.parametrize("name", sorted(UNTOUCHED_TABLE))
def test_add_into_a_damaged_store_is_one_error_and_writes_nothing(pristine, tmp_path, name):
    root = tmp_path / "project"
    shutil.copytree(pristine(name), root)
    path = root / "mem" / "demo" / f"{name}.sqlite3"
    for snapshot in path.parent.glob("*.faiss"):
        snapshot.unlink()  # the vectors are then read from the damaged file
    damage_page(path, UNTOUCHED_TABLE[name])
    before = path.read_bytes()
    added = middle(root, "add", "written after the damage")
    assert_one_error_naming(added, path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", SQLITE_STORES)
def test_a_store_cut_in_half_is_rebuilt_by_the_reindex_its_error_advises(pristine, tmp_path, name):
    root = tmp_path / "project"
    shutil.copytree(pristine(name), root)
    path = root / "mem" / "demo" / f"{name}.sqlite3"
    damage_file(path, "cut")
    cut = path.read_bytes()
    refused = middle(root, "list")
    assert_one_error_naming(refused, path)
    advised = re.search(r"`(middle memory reindex --from \w+)`", refused.stderr).group(1)
    rebuilt = middle(root, *advised.split()[2:])  # the command as the error wrote it
    if name == "hindsight":  # its schema outgrows a page: the half that went held the table's
        assert_one_error_naming(rebuilt, path)  # definition, so no doc can be found: said so
        assert "No doc could be read from it" in rebuilt.stderr and path.read_bytes() == cut
        return
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stderr == "" and "the old store was damaged" in rebuilt.stdout, rebuilt.stdout
    listed = middle(root, "list")
    assert listed.returncode == 0, listed.stderr
    kept = [line.split("  ", 1)[1] for line in listed.stdout.splitlines()]
    assert kept and kept == [doc for doc in DOCS if doc in kept]  # what could be read, in order
    (backup,) = path.parent.glob(".reindex-*/" + path.name)
    assert backup.read_bytes() == cut  # the damaged file, kept as it was
    assert middle(root, "add", "written after the rebuild").returncode == 0


def test_a_store_file_with_no_doc_left_is_not_rebuilt_empty(pristine, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(pristine("hybrid"), root)
    path = root / "mem" / "demo" / "hybrid.sqlite3"
    with open(path, "r+b") as handle:  # the schema page: nothing can be found in the file
        handle.seek(100)
        handle.write(b"\xff" * 3996)
    rebuilt = middle(root, "reindex", "--from", "hybrid")
    assert_one_error_naming(rebuilt, path)
    assert "No doc could be read from it" in rebuilt.stderr
    assert not list(path.parent.glob(".reindex-*"))


def test_a_damaged_rebuild_token_is_one_error_naming_it_and_the_remedy(pristine, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(pristine("hybrid"), root)
    token = root / "mem" / "demo" / ".store-epoch"
    token.write_bytes(b"\xff\xfe\x00 not text")
    out = middle(root, "list")
    lines = out.stderr.strip().splitlines()
    assert out.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert str(token) in lines[0] and "delete it" in lines[0] and "Error" not in lines[0]
    token.unlink()  # the remedy
    assert middle(root, "list").returncode == 0


def test_a_garbage_generation_is_one_error_naming_the_file_and_reindex_mends_it(pristine, tmp_path):
    root = tmp_path / "project"
    shutil.copytree(pristine("hybrid"), root)
    path = root / "mem" / "demo" / "hybrid.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = 'x7' WHERE key = 'generation'")
    found = middle(root, "search", "login form bug")
    assert_one_error_naming(found, path)
    assert "'generation' is 'x7', not a whole number" in found.stderr
    assert "ValueError" not in found.stderr
    assert middle(root, "reindex", "--from", "hybrid").returncode == 0
    again = middle(root, "search", "login form bug")
    assert again.returncode == 0 and GOLDEN in again.stdout.splitlines()[0], again.stderr


@pytest.mark.parametrize("name", ["dense", "hybrid"])
def test_a_snapshot_with_a_valid_checksum_but_missing_vectors_is_not_trusted(pristine, tmp_path,
                                                                             name):
    from backends.retrieval.vector import VectorIndex

    root = tmp_path / "project"
    shutil.copytree(pristine(name), root)
    (snapshot,) = (root / "mem" / "demo").glob("*.faiss")
    index = VectorIndex.load(snapshot)
    index.remove([int(index.ids().max())])  # the newest doc's vector: the golden doc's
    index.save(snapshot)  # a checksum of its own content: valid
    found = middle(root, "search", GOLDEN)
    assert found.returncode == 0, found.stderr
    assert str(snapshot) in found.stderr and "11 vectors where the store holds 12" in found.stderr
    assert GOLDEN in found.stdout.splitlines()[0]
    assert not snapshot.exists()  # dropped, so the next snapshot is written afresh
