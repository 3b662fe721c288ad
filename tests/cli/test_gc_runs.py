"""`middle gc --runs-older-than AGE` / `[store] keep_days`: the run events and checkpoints of ended
runs older than AGE are pruned (each run's end and feedback kept), never those of a running run
or of a run that can still be resumed; a bad age is one `error:` line and changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from test_review_cli import middle, one_error_line

from orchestrator.config.settings import load_config
from orchestrator.running.checkpoints import open_checkpointer
from tickets.model import Ticket
from tickets.store import TicketStore

OLD = (datetime.now(timezone.utc) - timedelta(days=60)).isoformat(timespec="microseconds")


def _checkpoint(saver, run_id: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver.put({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})


def _has_checkpoint(saver, run_id: str) -> bool:
    return saver.get_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}}) is not None


def _kinds(store: TicketStore, run_id: str) -> list[str]:
    return [e["kind"] for e in store.list_events(run_id=run_id)]


def test_gc_prunes_only_ended_old_runs(store_target, tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    toml = f'[store]\nurl = "{store_target}"\n' if store_target.startswith("postgresql") else ""
    (root / "middle.toml").write_text(toml)
    config = load_config(root / "middle.toml", environ={})
    target = config.store.url or config.db_path
    runs = {}
    with TicketStore(target) as store:
        checkpoints = open_checkpointer(config.checkpoint_target, pool=store.pool_for(config.checkpoint_target))
        for tid in ("old", "fresh", "running", "resumable"):
            store.upsert_ticket(Ticket(id=tid, project_id="p", title=tid, project_path=str(root)))
            runs[tid] = run_id = store.claim_new_run(tid, ["pending"])
            store.add_event(run_id, tid, "note", {"text": "working"})
            store.add_feedback(tid, run_id, "also this")
            _checkpoint(checkpoints.saver, run_id)
        store.end_run("old", runs["old"], "complete")
        store.end_run("fresh", runs["fresh"], "complete")
        store.end_run("resumable", runs["resumable"], "failed", "Claude Code crashed")
        with store._db.write() as conn:  # three of them long ago (the running one started then)
            conn.execute("UPDATE runs SET started_at = ?, ended_at = CASE WHEN status = 'running' THEN NULL"
                         " ELSE ? END WHERE id <> ?", (OLD, OLD, runs["fresh"]))
        before = {tid: _kinds(store, run) for tid, run in runs.items()}

    one_error_line(middle(root, "gc", "--runs-older-than", "soon", code=1), "'soon' is not an age", "30d")
    one_error_line(middle(root, "gc", "--runs-older-than", "0d", code=1), "'0d' is not an age", "above 0")

    dry = middle(root, "gc", "--runs-older-than", "30d", "--dry-run")
    assert "would prune 1 ended run(s) older than 30d" in dry.stdout
    out = middle(root, "gc", "--runs-older-than", "30d")
    assert "pruned 1/1 run(s)" in out.stdout
    assert "pruned 1 ended run(s) older than 30d: 1 run event(s)" in out.stdout
    with TicketStore(target) as store:
        checkpoints = open_checkpointer(config.checkpoint_target, pool=store.pool_for(config.checkpoint_target))
        assert _kinds(store, runs["old"]) == ["feedback", "run_end"]  # how it ended, and a person's words
        assert not _has_checkpoint(checkpoints.saver, runs["old"])
        for tid in ("fresh", "running", "resumable"):  # new, still running, or may be resumed
            assert _kinds(store, runs[tid]) == before[tid]
            assert _has_checkpoint(checkpoints.saver, runs[tid])
        assert store.get_run(runs["old"])["status"] == "complete"  # the run's record stays
        checkpoints.close()
    (root / "middle.toml").write_text(toml + ("" if toml else "[store]\n") + "keep_days = 30\n")
    assert "pruned 0 ended run(s) older than 30d" in middle(root, "gc").stdout


def test_gc_baselines_drops_the_checks_stored_results_on_base_commits(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "middle.toml").write_text("")
    config = load_config(root / "middle.toml", environ={})
    with TicketStore(config.db_path) as store:
        result = {"command": "make test", "exit_code": 1, "duration_s": 0.1, "tail": "", "timed_out": False}
        store.put_check_baseline("c1", "make test", result)
    assert "would drop" in middle(root, "gc", "--baselines", "--dry-run").stdout
    with TicketStore(config.db_path) as store:
        assert store.check_baseline("c1", "make test") is not None
    assert "dropped 1 stored check result(s)" in middle(root, "gc", "--baselines").stdout
    with TicketStore(config.db_path) as store:
        assert store.check_baseline("c1", "make test") is None
