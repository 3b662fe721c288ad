"""The permission rules and argv that keep Claude Code's writes inside the project; no CLI needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.coding_agent.claude_code import ClaudeCodeAgent, ClaudeCodeOptions
from orchestrator.coding_agent.scope import edit_rule, writable_dirs
from orchestrator.coding_agent.stream_json import TurnStream
from orchestrator.errors import CodingAgentError


def argv(cwd: str | Path = "/work/proj", **options) -> list[str]:
    return ClaudeCodeAgent(ClaudeCodeOptions(**options)).command("claude", Path(cwd), session_id=None,
                                                                  resume=False)


def rules(cmd: list[str]) -> list[str]:
    """The items after --allowedTools, up to the next flag."""
    start = cmd.index("--allowedTools") + 1
    end = next((i for i in range(start, len(cmd)) if cmd[i].startswith("--")), len(cmd))
    return cmd[start:end]


def test_default_allows_edits_in_the_project_only_and_no_shell():
    cmd = argv()
    assert rules(cmd) == ["Read", "Glob", "Grep", "Edit(//work/proj/**)"]
    assert cmd[cmd.index("--permission-mode") + 1] == "acceptEdits"
    assert not {"Write", "Edit", "Bash"} & set(cmd) and "--add-dir" not in cmd


def test_every_editing_tool_collapses_into_one_rule_and_user_scoped_rules_are_kept():
    cmd = argv(allowed_tools=["Read", "Write", "MultiEdit", "NotebookEdit", "Edit", "Edit(//srv/data/**)",
                              "Bash(pytest *)"])
    assert rules(cmd) == ["Read", "Edit(//srv/data/**)", "Bash(pytest *)", "Edit(//work/proj/**)"]


def test_no_editing_tool_listed_means_no_edit_rule():
    assert rules(argv(allowed_tools=["Read", "Grep"])) == ["Read", "Grep"]
    assert "--allowedTools" not in argv(allowed_tools=[])


def test_additional_dirs_get_add_dir_and_an_edit_rule(monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    cmd = argv(additional_dirs=["../shared", "/opt/lib", "~/notes"])
    assert rules(cmd)[-4:] == ["Edit(//work/proj/**)", "Edit(//work/shared/**)", "Edit(//opt/lib/**)",
                               "Edit(//home/u/notes/**)"]
    assert cmd[cmd.index("--add-dir") + 1:] == ["/work/shared", "/opt/lib", "/home/u/notes"]


def test_rules_are_one_argv_item_each_so_odd_paths_survive():
    cmd = argv(cwd="/w/my proj,v2/[x]*!#")
    # Glob characters are escaped (unescaped, `*` would also match a sibling directory).
    assert rules(cmd)[-1] == r"Edit(//w/my proj,v2/\[x\]\*\!\#/**)"


@pytest.mark.parametrize("name", ["what?", "back\\slash"])
def test_a_directory_no_rule_can_name_is_refused_before_launch(tmp_path, name):
    (tmp_path / name).mkdir()
    worker = ClaudeCodeAgent(ClaudeCodeOptions(cli_path="/nonexistent/claude"))
    with pytest.raises(CodingAgentError, match=r"cannot name .* exactly.*scope_to_project = false"):
        worker.run_turn("hi", tmp_path / name, session_id=None, resume=False)


def test_a_symlinked_project_is_allowed_under_both_names(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    dirs = writable_dirs(tmp_path / "link", [])
    assert dirs == [tmp_path / "link", (tmp_path / "real").resolve()]
    assert rules(argv(cwd=tmp_path / "link"))[-2:] == [edit_rule(d) for d in dirs]


def test_opt_out_passes_the_tools_unchanged():
    cmd = argv(scope_to_project=False, allowed_tools=["Read", "Write", "Bash"], additional_dirs=["/opt/lib"])
    assert rules(cmd) == ["Read", "Write", "Bash"]
    assert cmd[cmd.index("--add-dir") + 1:] == ["/opt/lib"]


@pytest.mark.parametrize("tools, mode, field, expected", [
    (["Read", "Bash"], "acceptEdits", "allowed_tools", "'Bash' lets Claude Code run any shell command"),
    (["Bash(*)"], "acceptEdits", "allowed_tools", "any shell command"),
    (["Read"], "bypassPermissions", "permission_mode", "'bypassPermissions' does not stop at permission rules"),
    (["Read"], "auto", "permission_mode", "'auto' does not stop"),
])
def test_settings_that_let_writes_escape_are_rejected_unless_opted_out(tools, mode, field, expected):
    with pytest.raises(ValidationError) as err:
        ClaudeCodeOptions(allowed_tools=tools, permission_mode=mode)
    (problem,) = err.value.errors()
    assert problem["loc"] == (field,)
    assert expected in problem["msg"] and "scope_to_project = false" in problem["msg"]
    ClaudeCodeOptions(allowed_tools=tools, permission_mode=mode, scope_to_project=False)


def test_named_commands_are_the_users_choice():
    assert rules(argv(allowed_tools=["Bash(pytest *)", "Bash(git status)"])) == ["Bash(pytest *)", "Bash(git status)"]


def test_every_option_is_documented():
    missing = [name for name, f in ClaudeCodeOptions.model_fields.items() if not f.description]
    assert missing == []


def test_a_missing_additional_dir_is_a_worker_error_before_launch(tmp_path):
    worker = ClaudeCodeAgent(ClaudeCodeOptions(cli_path="/nonexistent/claude", additional_dirs=["../gone"]))
    with pytest.raises(CodingAgentError, match=r"additional directory .*gone does not exist.*additional_dirs"):
        worker.run_turn("hi", tmp_path, session_id=None, resume=False)


def test_permission_denials_are_reported_from_the_result_line():
    stream = TurnStream()
    line = ('{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s",'
            '"permission_denials":[{"tool_name":"Write","tool_use_id":"t1","tool_input":'
            '{"file_path":"/w/outside.py","content":"x"}},{"tool_name":"Bash","tool_use_id":"t2",'
            '"tool_input":{"command":"echo hi > ../o.txt"}}]}')
    event = stream.feed(line)[0]
    assert event["permission_denials"] == [{"tool": "Write", "target": "/w/outside.py"},
                                           {"tool": "Bash", "target": "echo hi > ../o.txt"}]
