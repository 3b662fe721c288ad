"""A review round runs on any machine of a team: machine A runs the ticket and pushes its branch
to the shared (bare) repository; `middle feedback` on machine B (its own clone and worktree root,
the same ticket store) continues that branch as pushed in a worktree of its own, in a new Claude
Code session told the earlier round. When the worktree was removed on A itself, the round makes
it again from the branch there (or, gone too, as pushed). A branch that is neither here nor
pushed as it was left is refused with one line and nothing claimed or changed. Real git, the real graph and
store, scripted model and worker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchestrator.coding_agent.base import TurnResult
from orchestrator.config.settings import Config
from orchestrator.errors import TicketError
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.workspace.git import git, out
from tickets.model import Ticket


class MachineWorker(RecordingCodingAgent):
    """A recording worker that, as Claude Code does, resumes only the sessions it began (they
    live under its machine's CLAUDE_CONFIG_DIR)."""

    def __init__(self, script):
        super().__init__(script)
        self.sessions: set[str] = set()

    def run_turn(self, prompt, cwd, *, session_id, resume, on_event=None):
        if resume and session_id not in self.sessions:
            self.calls.append({"prompt": prompt, "cwd": str(cwd), "session_id": session_id, "resume": resume})
            return TurnResult(
                session_id=session_id,
                text="",
                is_error=True,
                exit_code=1,
                error=f"Claude Code has no session {session_id} to resume here (sessions live "
                "under CLAUDE_CONFIG_DIR, per project directory). Start a new session "
                "for this ticket.",
            )
        self.sessions.add(session_id)
        return super().run_turn(prompt, cwd, session_id=session_id, resume=resume, on_event=on_event)


def write(name: str, text: str):
    def act(prompt, cwd):
        (cwd / name).write_text(text)
        return f"Wrote {name}."

    return act


def shared_repo(tmp_path: Path) -> Path:
    seed = make_repo(tmp_path / "seed", {"README.md": "sample\n"})
    remote = tmp_path / "shared.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    return remote


def machine(
    tmp_path: Path, name: str, remote: Path, store_url: str | None, llm, worker, *, shared: bool = True
) -> Orchestrator:
    """One machine: its own clone of the shared repository and state dir (worktree root)."""
    home = tmp_path / name
    clone = home / "repo"
    if not clone.exists():
        git(tmp_path, "clone", "--quiet", str(remote), str(clone))
    cfg = Config(
        root=home,
        state_dir=str(home / "state"),
        store={"url": store_url},
        project={"path": str(clone), "base_branch": "main", "repo_url": str(remote) if shared else None},
        agent={"max_turns": 5, "max_cost_usd": 1.0},
        memory={"backend": "none"},
    )
    return Orchestrator(
        cfg, llm=llm, coding_agent=worker, registry=PluginRegistry(load_entry_points=False), project_override=str(clone)
    )


def round_one(tmp_path: Path, remote: Path, store_url: str | None, *, shared: bool = True) -> Orchestrator:
    """Machine A runs t1 to complete: hello.py committed on middle/t1 (pushed when shared)."""
    llm = ScriptedAgentLLM(
        [
            plan_reply("Create hello.py"),
            decision_reply(True, "Added hello.py."),
            plan_reply("Also handle empty input in empty.py"),
            decision_reply(True, "Handled empty input."),
        ]
    )
    worker = MachineWorker([write("hello.py", "print('hi')\n"), write("empty.py", "EMPTY = ''\n")])
    orch = machine(tmp_path, "a", remote, store_url, llm, worker, shared=shared)
    orch.store.upsert_ticket(
        Ticket(
            id="t1",
            project_id="demo",
            title="Add hello",
            description="Create hello.py",
            project_path=str(tmp_path / "a" / "repo"),
        )
    )
    assert orch.run_ticket("t1").status == "complete"
    return orch


def round_two_machine(tmp_path: Path, remote: Path, store_url: str | None, *, shared: bool = True):
    llm = ScriptedAgentLLM(
        [plan_reply("Also handle empty input in empty.py"), decision_reply(True, "Handled empty input.")]
    )
    worker = MachineWorker([write("empty.py", "EMPTY = ''\n")])
    return machine(tmp_path, "b", remote, store_url, llm, worker, shared=shared), worker


def notes(orch: Orchestrator, run_id: str) -> list[str]:
    return [e["data"].get("text", "") for e in orch.store.list_events(run_id=run_id) if e["kind"] == "note"]


def continues_note(orch: Orchestrator, run_id: str) -> list[str]:
    return [n for n in notes(orch, run_id) if "continues middle/t1 from its branch as pushed" in n]


@pytest.mark.postgres
def test_feedback_on_another_machine_continues_the_branch_as_pushed(tmp_path, pg_url):
    remote = shared_repo(tmp_path)
    with round_one(tmp_path, remote, pg_url) as a:
        first = a.store.latest_run("t1")
        session = a.store.list_turns(run_id=first["id"])[0]["session_id"]
    assert out(remote, "rev-parse", "middle/t1") == first["head_commit"]

    b, worker = round_two_machine(tmp_path, remote, pg_url)
    with b:
        outcome = b.feedback("t1", "also handle empty input")
        assert outcome.status == "complete", outcome.reason
        runs = b.store.list_runs("t1")
        assert len(runs) == 2 and b.store.round_of(runs[1]["id"]) == 2
        here = tmp_path / "b" / "state" / "worktrees" / "t1"
        assert runs[1]["worktree"] == str(here) and runs[1]["repo"] == str(tmp_path / "b" / "repo")
        # B's worktree: round 1's commit (made on A), the round's commit on top
        head = runs[1]["head_commit"]
        assert out(here, "rev-parse", "HEAD") == head != first["head_commit"]
        assert out(here, "rev-parse", "HEAD~1") == first["head_commit"]
        assert (here / "hello.py").is_file() and (here / "empty.py").is_file()
        # pushed again: the shared branch holds both rounds
        assert out(remote, "rev-parse", "middle/t1") == head
        assert out(remote, "show", "middle/t1:hello.py") == "print('hi')"
        assert out(remote, "show", "middle/t1:empty.py") == "EMPTY = ''"
        assert {f["path"] for f in b.diff("t1")["files"]} == {"hello.py", "empty.py"}
        # one note says where the round continues from
        assert len(continues_note(b, runs[1]["id"])) == 1, notes(b, runs[1]["id"])
        assert b.store.get_ticket("t1").status.value == "complete"
    # round 1's Claude Code session is on A: B tried it, then began a new one told the earlier round
    lost, new = worker.calls
    assert lost["resume"] and lost["session_id"] == session
    assert not new["resume"] and new["session_id"] != session and new["cwd"] == str(here)
    assert "Create hello.py" in new["prompt"] and "Also handle empty input in empty.py" in new["prompt"]


@pytest.mark.parametrize("why", ["never pushed", "rewritten"])
@pytest.mark.parametrize("where", [pytest.param("another machine", marks=pytest.mark.postgres), "same machine"])
def test_a_branch_not_pushed_as_it_was_left_is_refused_and_nothing_changes(tmp_path, request, where, why):
    remote = shared_repo(tmp_path)
    store_url = request.getfixturevalue("pg_url") if where == "another machine" else None
    shared = why == "rewritten"
    a = round_one(tmp_path, remote, store_url, shared=shared)
    first = a.store.latest_run("t1")
    if why == "rewritten":  # someone force-pushed the branch without round 1's commit
        git(remote, "update-ref", "refs/heads/middle/t1", first["base_commit"])
    if where == "another machine":
        a.close()
        shutil.rmtree(tmp_path / "a")  # machine A, and its disk, are elsewhere
        orch, _worker = round_two_machine(tmp_path, remote, store_url, shared=shared)
        repo = tmp_path / "b" / "repo"
    else:  # the user removed the worktree and its branch
        git(tmp_path / "a" / "repo", "worktree", "remove", "--force", first["worktree"])
        git(tmp_path / "a" / "repo", "branch", "--quiet", "-D", "middle/t1")
        orch, repo = a, tmp_path / "a" / "repo"
    with orch:
        before = (
            orch.store.get_ticket("t1"),
            orch.store.list_runs("t1"),
            orch.store.list_events(ticket_id="t1"),
            out(repo, "for-each-ref", "refs/heads"),
            out(repo, "worktree", "list"),
        )
        with pytest.raises(TicketError) as err:
            orch.feedback("t1", "also handle empty input")
        message = str(err.value)
        assert "\n" not in message and "is not on this machine" in message, message
        assert {
            "never pushed": "its branch middle/t1 is not here either, and no shared repository holds it",
            "rewritten": "does not hold the run's last commit",
        }[why] in message
        assert "give the feedback on the machine that ran it" in message
        assert orch.store.get_claim("t1") is None
        assert (
            orch.store.get_ticket("t1"),
            orch.store.list_runs("t1"),
            orch.store.list_events(ticket_id="t1"),
            out(repo, "for-each-ref", "refs/heads"),
            out(repo, "worktree", "list"),
        ) == before


@pytest.mark.parametrize(
    "removed, shared, source",
    [
        ("worktree", False, "its branch here"),  # the round needs no shared repository
        ("worktree", True, "its branch here"),
        ("worktree and branch", True, "its branch as pushed"),
    ],
)
def test_a_removed_worktree_is_made_again(tmp_path, removed, shared, source):
    remote = shared_repo(tmp_path)
    repo = tmp_path / "a" / "repo"
    with round_one(tmp_path, remote, None, shared=shared) as a:
        first = a.store.latest_run("t1")
        git(repo, "worktree", "remove", "--force", first["worktree"])
        if removed == "worktree and branch":
            git(repo, "branch", "--quiet", "-D", "middle/t1")
        outcome = a.feedback("t1", "also handle empty input")
        assert outcome.status == "complete", outcome.reason
        second = a.store.latest_run("t1")
        here = Path(first["worktree"])  # the same place, made again
        assert second["worktree"] == str(here) and (here / "hello.py").is_file() and (here / "empty.py").is_file()
        assert out(here, "rev-parse", "HEAD~1") == first["head_commit"]
        assert out(repo, "rev-parse", "middle/t1") == second["head_commit"]
        if shared:
            assert out(remote, "rev-parse", "middle/t1") == second["head_commit"]
        assert {f["path"] for f in a.diff("t1")["files"]} == {"hello.py", "empty.py"}
        said = [n for n in notes(a, second["id"]) if f"continues middle/t1 from {source}" in n]
        assert len(said) == 1, notes(a, second["id"])


def test_a_shared_repository_out_of_reach_is_said_and_nothing_changes(tmp_path):
    remote = shared_repo(tmp_path)
    with round_one(tmp_path, remote, None) as a:
        first = a.store.latest_run("t1")
        git(tmp_path / "a" / "repo", "worktree", "remove", "--force", first["worktree"])
        git(tmp_path / "a" / "repo", "branch", "--quiet", "-D", "middle/t1")
        remote.rename(tmp_path / "moved.git")
        before = (a.store.get_ticket("t1"), a.store.list_runs("t1"), a.store.list_events(ticket_id="t1"))
        with pytest.raises(TicketError) as err:
            a.feedback("t1", "also handle empty input")
        message = str(err.value)
        assert "\n" not in message and "could not be read from the shared repository" in message, message
        assert "Could not read from remote repository" in message and "give the feedback on the machine" in message
        assert a.store.get_claim("t1") is None
        assert (a.store.get_ticket("t1"), a.store.list_runs("t1"), a.store.list_events(ticket_id="t1")) == before


@pytest.mark.postgres
def test_a_round_back_on_the_first_machine_continues_the_latest_round_not_its_stale_worktree(tmp_path, pg_url):
    remote = shared_repo(tmp_path)
    a = round_one(tmp_path, remote, pg_url)  # its script has round 3's replies (empty.py again)
    first = a.store.latest_run("t1")
    b, _worker = round_two_machine(tmp_path, remote, pg_url)
    with b:
        assert b.feedback("t1", "also handle empty input").status == "complete"
        second = b.store.latest_run("t1")
        # machines whose state dirs have the same path: the round's worktree is recorded at the
        # path that, on A, still holds A's stale copy of the branch (round 1 only)
        b.store.set_run_fields(second["id"], repo=first["repo"], worktree=first["worktree"])
    with a:
        assert out(first["worktree"], "rev-parse", "HEAD") == first["head_commit"]  # stale
        a.coding_agent.script[:] = [write("c.py", "C = 3\n")]
        a.services.agent_llm.replies[:] = [plan_reply("Write c.py"), decision_reply(True, "Wrote c.py.")]
        assert a.feedback("t1", "add c.py").status == "complete"
        third = a.store.latest_run("t1")
        here = Path(first["worktree"])
        assert out(here, "rev-parse", "HEAD~1") == second["head_commit"]  # round 2's commit stays
        assert out(remote, "rev-parse", "middle/t1") == third["head_commit"]
        assert {f["path"] for f in a.diff("t1")["files"]} == {"hello.py", "empty.py", "c.py"}
        assert len(continues_note(a, third["id"])) == 1, notes(a, third["id"])
