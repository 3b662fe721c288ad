"""Stored checkpoints are untrusted input: a tampered one runs nothing and is one clear error."""

from __future__ import annotations

import sqlite3

import ormsgpack
import pytest
from click.testing import CliRunner
from graph_helpers import add_ticket, make_config, make_orchestrator
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_POS_ARGS, JsonPlusSerializer

from orchestrator.errors import CodingAgentError, StoreError
from orchestrator.testing.fakes import ScriptedAgentLLM, plan_reply


class _FailingWorker:
    """Fails turn 1, so the run stops resumable with a checkpoint before `work`."""

    def run_turn(self, *args, **kwargs):
        raise CodingAgentError("Claude Code is not reachable right now")


def _failed_run(tmp_path, project):
    config = make_config(tmp_path, memory=False)
    with make_orchestrator(config, ScriptedAgentLLM([plan_reply("do it")]), _FailingWorker()) as orch:
        add_ticket(orch, project)
        outcome = orch.run_ticket("t1")
    assert outcome.status == "failed" and outcome.resumable
    return config


def _plant(checkpoint_db, marker) -> None:
    """Rewrite every stored checkpoint so its state names os.system (what an attacker would do)."""
    evil = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(("os", "system", [f"touch {marker}"])))
    conn = sqlite3.connect(checkpoint_db)
    rows = conn.execute("SELECT rowid, type, checkpoint FROM checkpoints").fetchall()
    assert rows
    for rowid, kind, blob in rows:
        data = JsonPlusSerializer().loads_typed((kind, blob))
        data["channel_values"]["ticket_id"] = evil
        conn.execute("UPDATE checkpoints SET type = 'msgpack', checkpoint = ? WHERE rowid = ?",
                     (ormsgpack.packb(data), rowid))
    conn.commit()
    conn.close()


def test_the_default_langgraph_reader_would_have_run_it(tmp_path):
    # Proves the planted payload is live: LangGraph's permissive reader calls os.system.
    marker = tmp_path / "pwned-by-default-reader"
    evil = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(("os", "system", [f"touch {marker}"])))
    JsonPlusSerializer().loads_typed(("msgpack", ormsgpack.packb({"x": evil})))
    assert marker.exists()


def test_a_tampered_checkpoint_runs_nothing_on_resume(tmp_path, project):
    config = _failed_run(tmp_path, project)
    marker = tmp_path / "pwned"
    _plant(config.checkpoint_path, marker)
    with make_orchestrator(config, ScriptedAgentLLM([]), _FailingWorker()) as orch:
        with pytest.raises(StoreError) as err:
            orch.resume("t1")
    assert not marker.exists()
    assert str(config.checkpoint_path) in str(err.value) and "os.system" in str(err.value)


def test_the_cli_says_so_in_one_error_line(tmp_path, project, monkeypatch):
    from orchestrator.cli.main import main

    (tmp_path / "middle.toml").write_text(f'state_dir = "state"\n[project]\npath = "{project}"\n')
    config = make_config(tmp_path, memory=False)
    _failed_run(tmp_path, project)
    marker = tmp_path / "pwned"
    _plant(config.checkpoint_path, marker)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-used")
    result = CliRunner().invoke(main, ["resume", "t1"])
    assert result.exit_code == 1 and not marker.exists()
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "tampered" in lines[0]


def test_a_corrupt_checkpoint_file_is_one_clear_error(tmp_path, project):
    config = _failed_run(tmp_path, project)
    with open(config.checkpoint_path, "r+b") as fh:
        fh.seek(0)
        fh.write(b"\x00" * 200)
    for extra in ("-wal", "-shm"):
        config.checkpoint_path.with_name(config.checkpoint_path.name + extra).unlink(missing_ok=True)
    with pytest.raises(StoreError, match="checkpoint file .* is unreadable"):
        with make_orchestrator(config, ScriptedAgentLLM([]), _FailingWorker()) as orch:
            orch.resume("t1")


def _plant_postgres(url: str, marker) -> None:
    """The same tampering, in the checkpoint tables of a PostgreSQL store (langgraph's schema:
    the channel values live as typed blobs in checkpoint_blobs)."""
    import psycopg

    evil = ormsgpack.Ext(EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(("os", "system", [f"touch {marker}"])))
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT thread_id, channel, version FROM checkpoint_blobs WHERE channel = 'ticket'"
        ).fetchall()
        assert rows
        for thread_id, channel, version in rows:
            conn.execute(
                "UPDATE checkpoint_blobs SET type = 'msgpack', blob = %s WHERE thread_id = %s "
                "AND channel = %s AND version = %s",
                (ormsgpack.packb(evil), thread_id, channel, version),
            )


@pytest.mark.postgres
def test_a_tampered_postgresql_checkpoint_runs_nothing_on_resume(tmp_path, project, pg_url):
    config = make_config(tmp_path, memory=False)
    config.store.url = pg_url
    with make_orchestrator(config, ScriptedAgentLLM([plan_reply("do it")]), _FailingWorker()) as orch:
        add_ticket(orch, project)
        assert orch.run_ticket("t1").resumable
    marker = tmp_path / "pwned"
    _plant_postgres(pg_url, marker)
    with make_orchestrator(config, ScriptedAgentLLM([]), _FailingWorker()) as orch:
        with pytest.raises(StoreError) as err:
            orch.resume("t1")
    assert not marker.exists()
    assert "os.system" in str(err.value) and "middle_test" in str(err.value)  # names the database
