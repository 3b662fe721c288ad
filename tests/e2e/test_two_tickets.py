"""The issue's end-to-end run: two tickets, real Claude Code, memory on and then off."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from e2e_helpers import body_text, config, decide, done, fresh_project, orchestrator, plan, worktree, write_file

from orchestrator.cli.main import main
from orchestrator.memory.format import doc_id

pytestmark = [pytest.mark.cli, pytest.mark.slow]

SUMMARY_ONE = "Created notes.txt with Claude Code's Write tool; LESSON-ALPHA: keep notes short."
TICKETS = {
    "t1.md": "---\ntitle: Add a notes file\nproject: calc\nid: t1\n---\nCreate notes.txt saying hello.\n",
    "t2.md": "---\ntitle: Add a second notes file\nproject: calc\nid: t2\n---\nCreate more.txt like notes.txt.\n",
}


def script_two_tickets(fake_api) -> None:
    fake_api.script.agent(
        plan("Create the file notes.txt containing the word hello."),
        decide(True, SUMMARY_ONE),
        plan("Create the file more.txt containing the word more."),
        decide(True, "Created more.txt."),
    )
    fake_api.script.coding_agent(
        write_file("notes.txt", "hello\n"), done("Created notes.txt."),
        write_file("more.txt", "more\n"), done("Created more.txt."),
    )


def run_both(tmp_path, fake_api, claude_env, memory: bool, backend: str = "sliding_window"):
    repo = fresh_project(tmp_path, TICKETS)
    cfg = config(tmp_path, memory, backend)
    script_two_tickets(fake_api)
    with orchestrator(cfg, fake_api, claude_env) as orch:
        loaded = orch.sync_tickets()
        assert loaded.errors == []
        outcomes = [orch.run_ticket("t1"), orch.run_ticket("t2")]
        docs = {t: orch.store.memory_docs(t) for t in ("t1", "t2")}
    return repo, cfg, outcomes, docs


def middle_log(cfg_path, ticket_id):
    result = CliRunner().invoke(main, ["--config", str(cfg_path), "log", ticket_id, "--full"])
    assert result.exit_code == 0, result.output
    return result.output


# Every built-in backend that recalls by content: ticket 2 must recall ticket 1's summary.
RECALLING_BACKENDS = ["sliding_window", "hybrid", "hipporag", "hindsight"]
# Backends whose recall returns the indexed doc itself (others return facts drawn from it).
RETURNS_WHOLE_DOCS = {"sliding_window", "hybrid", "dense", "bm25", "hipporag"}


@pytest.mark.parametrize("backend", RECALLING_BACKENDS)
def test_two_tickets_with_memory(tmp_path, fake_api, claude_env, claude_cli, backend, monkeypatch):
    monkeypatch.setenv("MIDDLE_AGENT_CACHE_DIR", str(tmp_path / "embedding-cache"))
    repo, cfg, outcomes, docs = run_both(tmp_path, fake_api, claude_env, memory=True, backend=backend)
    assert [o.status for o in outcomes] == ["complete", "complete"], outcomes
    # Claude Code really wrote the files with its own Write tool, each in its ticket's worktree.
    assert (worktree(tmp_path, "t1") / "notes.txt").read_text() == "hello\n"
    assert (worktree(tmp_path, "t2") / "more.txt").read_text() == "more\n"
    assert not (repo / "notes.txt").exists() and not (repo / "more.txt").exists()
    worker = fake_api.requests_for("coding_agent")
    assert any('"tool_result"' in body_text(r) for r in worker)
    # Ticket 1's summary doc was indexed, exactly, and kept for revert.
    doc1 = f"Ticket: Add a notes file. Create notes.txt saying hello.. {SUMMARY_ONE}"
    assert docs["t1"] == [doc1]
    # Ticket 2's first middle-agent request starts with the memory of ticket 1.
    agent = fake_api.requests_for("agent")
    assert len(agent) == 4
    first_t2 = agent[2].body["messages"][0]["content"]
    # Ticket 1 is the project's newest ticket: "Recent work", dated, and not repeated below.
    # (after any standing knowledge: Hindsight's mental models come first)
    assert re.search(r"(^|\n\n)Memories invoked:\nRecent work \(newest first\):\n- [\d-]{10} "
                     + re.escape(f"[{doc_id(doc1)[:8]}] {doc1}"), first_t2)
    if backend in RETURNS_WHOLE_DOCS:
        assert first_t2.count(doc1) == 1
    recalled = first_t2.split("Ticket: Add a second notes file", 1)[0]
    assert "Memories invoked:" in recalled and "LESSON-ALPHA" in recalled
    # Nothing Claude Code sent to the fake carries that memory text.
    cc_requests = fake_api.requests_for("coding_agent") + fake_api.requests_for("aux")
    assert cc_requests and all("LESSON-ALPHA" not in body_text(r) for r in cc_requests)
    assert all("Memories invoked" not in body_text(r) for r in cc_requests)
    # `middle log` shows both tickets' turns.
    cfg_path = tmp_path / "middle.toml"
    cfg_path.write_text(f'state_dir = "{tmp_path / "state"}"\n[memory]\nsave_dir = "{tmp_path / "mem"}"\n'
                        f'backend = "{backend}"\n')
    log1, log2 = middle_log(cfg_path, "t1"), middle_log(cfg_path, "t2")
    assert "turn 1" in log1 and "Created notes.txt." in log1 and "LESSON-ALPHA" in log1
    assert "turn 1" in log2 and "Created more.txt." in log2 and "Memories invoked:" in log2
    assert "branch middle/t1 from main" in log1 and "notes.txt (+1 -0)" in log1


def test_two_tickets_with_memory_off(tmp_path, fake_api, claude_env, claude_cli):
    repo, cfg, outcomes, docs = run_both(tmp_path, fake_api, claude_env, memory=False)
    assert [o.status for o in outcomes] == ["complete", "complete"]
    assert (worktree(tmp_path, "t2") / "more.txt").read_text() == "more\n"
    assert not (tmp_path / "mem").exists()
    assert not list(tmp_path.rglob("sliding_window.sqlite3"))
    assert docs == {"t1": [], "t2": []}
    agent_users = [str(r.body["messages"]) for r in fake_api.requests_for("agent")]
    assert len(agent_users) == 4 and all("Memories invoked" not in m for m in agent_users)
