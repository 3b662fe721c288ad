"""`middle memory stats`, `history --full` and `show`'s usage as a user runs them (issue 38): usage
counts from the runs' recall and decision events, following a doc through its edits; a superseded
doc is no candidate; the whole before and after of an edit; an empty --with said in its words."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memory_cli_helpers import middle

from orchestrator.config.settings import load_config
from orchestrator.memory.facade import doc_id
from orchestrator.services import Services

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from server_helpers import make_project  # noqa: E402

OLD = "Ticket: Login. Sessions expire after one day."
NEW = "Ticket: Login. Sessions expire after seven days."
IDLE = "Ticket: Export. The CSV export streams rows."
LONG = "Ticket: Docs. " + "word " * 60 + "the very end of a long doc."


def recalled(root: Path, shown: list[str], used: list[str], runs: int) -> None:
    """`runs` runs of ticket 001-greeting whose recall showed `shown` and whose decision used `used`."""
    with Services(load_config(root / "middle.toml", environ={})) as svc:
        store = svc.store
        from orchestrator.running.sync import sync

        sync(store, svc.config, registry=svc.registry)
        for _ in range(runs):
            run = store.claim_new_run("001-greeting", ["pending", "complete"])
            assert run is not None
            store.add_event(run, "001-greeting", "recall", {
                "backend": "bm25", "memories": [{"id": doc_id(d)[:8]} for d in shown]})
            store.add_event(run, "001-greeting", "decision", {
                "decision": {"memories_used": [{"id": doc_id(d)[:8], "why": "it said so"} for d in used]}})
            assert store.end_run("001-greeting", run, "complete", None)


def test_stats_count_usage_through_an_edit_and_skip_superseded_candidates(tmp_path):
    make_project(tmp_path)
    for text in (OLD, IDLE):
        middle(tmp_path, "add", text)
    recalled(tmp_path, [OLD, IDLE], [OLD], runs=3)
    middle(tmp_path, "edit", doc_id(OLD)[:8], "--text", NEW)  # the counts go with the doc
    numbers = json.loads(middle(tmp_path, "stats", "--json").stdout)
    assert numbers["docs"] == 2 and numbers["by_source"]["hand"] == 2
    assert (numbers["recalled_docs"], numbers["recalls"], numbers["used_docs"], numbers["uses"]) == (2, 6, 1, 3)
    assert [c["id"] for c in numbers["candidates"]] == [doc_id(IDLE)[:8]]
    shown = middle(tmp_path, "show", doc_id(NEW)[:8]).stdout
    assert "usage: recalled in 3 run(s), used in 3" in shown
    middle(tmp_path, "supersede", doc_id(IDLE)[:8], "--with", "Ticket: Export. Exports are Parquet now.")
    numbers = json.loads(middle(tmp_path, "stats", "--json").stdout)
    assert numbers["candidates"] == [] and numbers["superseded"] == 1  # history is no candidate
    text = middle(tmp_path, "stats").stdout
    assert "by source: hand 2, supersede 1" in text and "candidates to supersede or forget" in text


def test_history_full_shows_the_whole_before_and_after(tmp_path):
    make_project(tmp_path)
    middle(tmp_path, "add", LONG)
    middle(tmp_path, "edit", doc_id(LONG)[:8], "--text", LONG.replace("very end", "new end"))
    short = middle(tmp_path, "history").stdout
    assert "the very end" not in short  # one line, cut at 120 characters
    full = middle(tmp_path, "history", "--full").stdout
    assert "-Ticket: Docs." in full and "the very end of a long doc." in full
    assert "+Ticket: Docs." in full and "the new end of a long doc." in full
    assert f"after: {LONG[:40]}" in full  # the add, whole


def test_an_empty_with_or_text_is_one_error_in_the_command_s_words(tmp_path):
    make_project(tmp_path)
    middle(tmp_path, "add", OLD)
    error = middle(tmp_path, "supersede", doc_id(OLD)[:8], "--with", "", ok=False).stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: the new text is empty") and "--with TEXT" in error[0]
    assert "--text" not in error[0]
    error = middle(tmp_path, "edit", doc_id(OLD)[:8], "--text", " ", ok=False).stderr.strip().splitlines()
    assert len(error) == 1 and "--text TEXT" in error[0]


def test_stats_and_history_in_a_fresh_project_say_no_memory_yet_and_create_nothing(tmp_path):
    """Before, both opened the ticket store for writing, which created it (and its folder): a
    read-only verb left state behind in a project that had none."""
    from orchestrator.testing import make_repo

    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    assert "no memory yet for project demo" in middle(tmp_path, "stats").stdout
    assert json.loads(middle(tmp_path, "stats", "--json").stdout)["docs"] == 0
    assert "no memory yet for project demo" in middle(tmp_path, "history").stdout
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == before  # (cache: the helper's)
    assert not (tmp_path / ".middle").exists()
    middle(tmp_path, "add", "The parser keeps tabs.")  # once there is memory, the numbers as before
    assert "1 doc(s)" in middle(tmp_path, "stats").stdout
    assert "added" in middle(tmp_path, "history").stdout
