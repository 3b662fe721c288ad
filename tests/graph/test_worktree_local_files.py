"""`[worktree] copy` and `setup` in a real project, whose local files are gitignored: an `.env`
listed in `.gitignore`, a `.venv/` and a `node_modules/` made by setup, an `*.egg-info` folder,
and a tracked file the copy gives local content. Through the real graph, store and git (the
scripted middle agent and the recording coding agent stand in for the models): the ticket runs
to complete with its commit, every turn's work-in-progress save holds the ticket's edits and
none of those paths, and no commit takes them. (The non-ignored `.env` case is in
test_check_loop.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

from graph_helpers import add_ticket, make_orchestrator

from orchestrator.config.settings import Config
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from orchestrator.workspace.git import out
from orchestrator.workspace.local_files import excluded, ignored

PY = sys.executable
IGNORE = ".env\n.venv/\nnode_modules/\n*.egg-info/\n__pycache__/\n"
# What `pip install -e .` and `npm ci` leave, in miniature.
SETUP = (f"{PY} -c \"import pathlib as p; "
         "[p.Path(d).mkdir(parents=True) for d in ('.venv/bin', 'node_modules/left-pad', 'demo.egg-info')]; "
         "p.Path('.venv/bin/python').write_text('#!'); p.Path('node_modules/left-pad/index.js').write_text('x'); "
         "p.Path('demo.egg-info/PKG-INFO').write_text('Name: demo'); print('Successfully installed demo-0.1')\"")
# Passes only where copy and setup did their work (and the ticket wrote calc.py).
CHECK = (f"{PY} -c \"import pathlib as p, sys; "
         "ok = all(p.Path(f).exists() for f in ('.env', '.venv/bin/python', 'node_modules/left-pad/index.js', "
         "'calc.py')) and 'local' in p.Path('settings.toml').read_text(); sys.exit(0 if ok else 1)\"")
IGNORED = {".env", ".venv", "node_modules", "demo.egg-info"}


def config(tmp_path: Path) -> Config:
    return Config(root=tmp_path, state_dir=str(tmp_path / "state"),
                  agent={"max_turns": 6, "max_cost_usd": 1.0}, memory={"backend": "none"},
                  check={"commands": [CHECK], "max_rounds": 1},
                  worktree={"copy": [".env", "settings.toml"], "setup": [SETUP]})


def project(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", {".gitignore": IGNORE, "settings.toml": "mode = 'shared'\n"})
    (repo / ".env").write_text("TOKEN=local\n")  # ignored: only in the user's folder
    (repo / "settings.toml").write_text("mode = 'local'\n")  # tracked, with the user's local content
    return repo


def test_ignored_files_of_copy_and_setup_are_never_committed_nor_saved_and_the_ticket_completes(tmp_path):
    repo = project(tmp_path)
    saved: list[list[str]] = []

    def first(prompt: str, cwd: Path) -> str:
        (cwd / "calc.py").write_text("x = 1\n")
        (cwd / "notes.md").write_text("a note\n")
        return "Wrote calc.py."

    def second(prompt: str, cwd: Path) -> str:  # turn 1's work-in-progress save, as a takeover finds it
        saved.append(out(cwd, "ls-tree", "-r", "--name-only", "refs/middle/wip/t1").split())
        saved.append(out(cwd, "diff", "--name-only", "HEAD", "refs/middle/wip/t1").split())
        return "Looked."

    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(False, "Half done.", "Look again"),
                            decision_reply(True, "Wrote calc.py.")])
    with make_orchestrator(config(tmp_path), llm, RecordingCodingAgent([first, second])) as orch:
        add_ticket(orch, repo)
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        assert orch.store.latest_run("t1")["check_status"] == "passed"
        notes = [e["data"]["text"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "note"]
        phases = [e["data"].get("phase") for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "check"]
        worktree = Path(orch.store.latest_run("t1")["worktree"])
    assert not any("could not save" in n for n in notes), notes  # every turn's save worked
    # the tracked file with local content does not hide the base commit: the base was measured
    assert phases[0] == "base" and not any("has no result on the base commit" in n for n in notes)
    tree, diff = saved
    assert sorted(diff) == ["calc.py", "notes.md"]  # the ticket's edits, and only them
    assert not IGNORED & {Path(p).parts[0] for p in tree}
    assert "settings.toml" not in diff  # its local content is not the ticket's edit
    committed = out(repo, "show", "--name-only", "--format=", "middle/t1").split()
    assert sorted(committed) == ["calc.py", "notes.md"]
    assert out(repo, "show", "middle/t1:settings.toml") == "mode = 'shared'"  # not the local content
    assert out(repo, "ls-tree", "-r", "--name-only", "middle/t1").split() == [
        ".gitignore", "calc.py", "notes.md", "settings.toml"]
    # The local files are still there for the next round's checks.
    assert (worktree / ".env").is_file() and (worktree / ".venv/bin/python").is_file()
    assert (worktree / "settings.toml").read_text() == "mode = 'local'\n"


def test_a_passing_setups_output_is_shown_in_the_log_and_its_events(tmp_path):
    from io import StringIO

    from rich.console import Console

    from orchestrator.cli.log_view import describe_event, print_log

    repo = project(tmp_path)
    llm = ScriptedAgentLLM([plan_reply("Write calc.py"), decision_reply(True, "Wrote calc.py.")])
    coder = RecordingCodingAgent([lambda prompt, cwd: (cwd / "calc.py").write_text("x = 1\n") and "Wrote it."])
    with make_orchestrator(config(tmp_path), llm, coder) as orch:
        add_ticket(orch, repo)
        assert orch.run_ticket("t1").status == "complete"
        events = orch.store.list_events(ticket_id="t1")
        buffer = StringIO()
        print_log(Console(file=buffer, width=200), orch.store, "t1")
    setup = next(e for e in events if e["kind"] == "setup")
    assert setup["data"]["exit_code"] == 0 and "Successfully installed demo-0.1" in setup["data"]["tail"]
    assert describe_event(setup).endswith("passed (exit 0) — Successfully installed demo-0.1")
    notes = [e["data"]["text"] for e in events if e["kind"] == "note"]
    assert any("passed" in n and n.endswith(": Successfully installed demo-0.1") for n in notes), notes
    assert "Successfully installed demo-0.1" in buffer.getvalue()


def test_only_local_paths_git_does_not_ignore_are_excluded_by_pathspec(tmp_path):
    """`git add` refuses an `:(exclude)` pathspec naming an ignored path: those are left to git."""
    from orchestrator.workspace.local_files import add_local

    repo = make_repo(tmp_path / "repo", {".gitignore": IGNORE, "settings.toml": "a\n"})
    (repo / ".env").write_text("x\n")
    (repo / ".venv").mkdir()
    (repo / "local.cfg").write_text("not ignored\n")
    add_local(repo, [".env", ".venv/", "local.cfg", "settings.toml"])
    assert ignored(repo, [".env", ".venv/", "local.cfg", "settings.toml"]) == {".env", ".venv/"}
    assert excluded(repo) == [":(exclude,top)local.cfg", ":(exclude,top)settings.toml"]
