"""The REAL Claude Code CLI keeps writes inside the project with the default options (fake API).

Each test scripts tool calls with paths under or outside the directory Claude Code announces as
its cwd, then checks the disk and what Claude Code sent back to the fake as each tool_result.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.coding_agent.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
from orchestrator.fake_api import reply, tool_use, working_directory
from orchestrator.fake_api.messages import content_text

pytestmark = [pytest.mark.cli, pytest.mark.slow]

REFUSED = "haven't granted it yet"  # Claude Code 2.1.330's words for a write no rule allows


def call(tool: str, rel: str, **args):
    """A scripted tool call on `rel`, a path relative to Claude Code's cwd ("../x" leaves it)."""
    def make(body):
        path = os.path.normpath(os.path.join(working_directory(body), rel))
        key = "command" if tool == "Bash" else "file_path"
        return reply(tool_use(tool, {key: rel if tool == "Bash" else path, **args}))
    return make


def results(fake_api) -> list[tuple[str, bool, str]]:
    """(tool, is_error, text) for each scripted tool call, from the tool_results Claude Code sent."""
    calls = [(b["tool_use"], b["id"]) for r in fake_api.requests_for("coding_agent")
             for b in r.reply.get("content", []) if isinstance(b, dict) and "tool_use" in b]
    sent = {}
    for r in fake_api.requests_for("coding_agent"):
        for m in r.body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result":
                    sent[b["tool_use_id"]] = (bool(b.get("is_error")), content_text(b.get("content")))
    return [(name, *sent[i]) for name, i in calls]


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "inside.py").write_text("x = 1\n")
    (tmp_path / "outside_existing.py").write_text("x = 1\n")
    return tmp_path / "proj"


@pytest.fixture
def run(fake_api, claude_cli, claude_env):
    def run_turn(cwd: Path, *calls, **options):
        fake_api.script.coding_agent(*calls, "Done.")
        worker = ClaudeCodeAgent(ClaudeCodeOptions(cli_path=claude_cli, **options), env=claude_env)
        turn = worker.run_turn("go", cwd, session_id=None, resume=False)
        assert turn.is_error is False, turn.error  # a refused tool call does not fail the turn
        return turn
    return run_turn


def test_write_inside_succeeds_and_write_outside_is_refused(fake_api, run, project):
    turn = run(project, call("Write", "app.py", content="print('hi')\n"),
               call("Write", "../outside.py", content="escaped\n"))
    assert (project / "app.py").read_text() == "print('hi')\n"
    assert not (project.parent / "outside.py").exists()
    inside, outside = results(fake_api)
    assert inside[:2] == ("Write", False)
    assert outside[:2] == ("Write", True) and REFUSED in outside[2] and "outside.py" in outside[2]
    assert turn.permission_denials == [{"tool": "Write", "target": str(project.parent.resolve() / "outside.py")}]


def test_edit_outside_is_refused_even_after_reading_the_file(fake_api, run, project):
    run(project, call("Read", "inside.py"), call("Edit", "inside.py", old_string="x = 1", new_string="x = 2"),
        call("Read", "../outside_existing.py"),
        call("Edit", "../outside_existing.py", old_string="x = 1", new_string="x = 2"))
    assert (project / "inside.py").read_text() == "x = 2\n"
    assert (project.parent / "outside_existing.py").read_text() == "x = 1\n"
    outcomes = [(tool, is_error) for tool, is_error, _ in results(fake_api)]
    assert outcomes == [("Read", False), ("Edit", False), ("Read", False), ("Edit", True)]
    assert REFUSED in results(fake_api)[3][2]


def test_shell_commands_cannot_write_outside_by_default(fake_api, run, project):
    turn = run(project, call("Bash", "echo hi > ../outside.txt", description="write outside"),
               call("Bash", "python3 -c \"open('../by_python.txt', 'w').write('x')\"", description="code"))
    assert not (project.parent / "outside.txt").exists() and not (project.parent / "by_python.txt").exists()
    redirect, code = results(fake_api)
    assert redirect[:2] == ("Bash", True) and "outside the working directories" in redirect[2]
    assert code[:2] == ("Bash", True) and "requires approval" in code[2]
    assert [d["tool"] for d in turn.permission_denials] == ["Bash", "Bash"]


def test_opting_out_lets_writes_and_commands_leave_the_project(fake_api, run, project):
    run(project, call("Write", "../outside.py", content="escaped\n"),
        call("Bash", "echo hi > ../outside.txt", description="write outside"),
        scope_to_project=False, allowed_tools=["Read", "Write", "Edit", "Bash"])
    assert (project.parent / "outside.py").read_text() == "escaped\n"
    assert (project.parent / "outside.txt").read_text() == "hi\n"
    assert [is_error for _, is_error, _ in results(fake_api)] == [False, False]


def test_the_rules_alone_grant_the_project_and_additional_dirs(fake_api, run, tmp_path):
    # permission_mode "default" accepts nothing by itself, so each write below that succeeds was
    # let through by a rule the worker generated. The project's name holds glob characters: left
    # unescaped, "[v2]*" would match the sibling "my proj,v-x!#" and refuse the project itself.
    project, sibling, shared = tmp_path / "my proj,[v2]*!#", tmp_path / "my proj,v-x!#", tmp_path / "shared"
    for d in (project, sibling, shared):
        d.mkdir()
    run(project, call("Write", "app.py", content="a\n"), call("Write", "../shared/lib.py", content="b\n"),
        call("Write", "../my proj,v-x!#/x.py", content="c\n"),
        permission_mode="default", additional_dirs=["../shared"])
    assert (project / "app.py").read_text() == "a\n" and (shared / "lib.py").read_text() == "b\n"
    assert not (sibling / "x.py").exists()
    assert [is_error for _, is_error, _ in results(fake_api)] == [False, False, True]
