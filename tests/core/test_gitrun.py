"""One owner for running git: `orchestrator.gitrun` starts every git process, imports nothing of
middle's above its error types, and decodes what git says the same way for every caller."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from orchestrator.errors import GitError
from orchestrator.gitrun import git
from orchestrator.testing import make_repo

ROOT = Path(__file__).resolve().parents[2]
_SPAWN = {"run", "Popen", "call", "check_call", "check_output"}


def _runs_git(call: ast.Call) -> bool:
    """`subprocess.run(["git", ...])` or `subprocess.run([git, ...])` (a path found by `which`)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _SPAWN and isinstance(func.value, ast.Name)
            and func.value.id == "subprocess" and call.args and isinstance(call.args[0], ast.List)
            and call.args[0].elts):
        return False
    first = call.args[0].elts[0]
    return (isinstance(first, ast.Constant) and first.value == "git") or (
        isinstance(first, ast.Name) and first.id == "git")


def test_only_gitrun_starts_git():
    starters = []
    for top in ("orchestrator", "tickets", "backends"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(isinstance(node, ast.Call) and _runs_git(node) for node in ast.walk(tree)):
                starters.append(str(path.relative_to(ROOT)))
    assert starters == ["orchestrator/gitrun.py"]


def test_gitrun_stands_on_the_ground_floor():
    """It imports the standard library and middle's error types only, so any layer may use it."""
    tree = ast.parse((ROOT / "orchestrator" / "gitrun.py").read_text(encoding="utf-8"))
    ours = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module and node.module.split(".")[0] in ("orchestrator", "tickets", "backends")}
    stdlib = {name.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
              for name in node.names}
    assert ours == {"orchestrator.errors"} and stdlib <= sys.stdlib_module_names


def test_bytes_in_text_out_line_ends_kept_and_a_failure_names_the_command(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\r\ntwo\r\n"})
    sha = git(repo, "hash-object", "-w", "--stdin", input=b"caf\xc3\xa9 \xff\n").stdout.strip()
    assert git(repo, "cat-file", "-p", sha).stdout == "café \ufffd\n"  # not UTF-8: replaced, no crash
    assert git(repo, "show", "HEAD:a.txt").stdout == "one\r\ntwo\r\n"
    with pytest.raises(GitError, match=r"git rev-parse --verify failed in .*repo: .*"):
        git(repo, "-c", "core.quotePath=false", "rev-parse", "--verify", "no-such-ref")
    assert git(repo, "rev-parse", "--verify", "no-such-ref", check=False).returncode != 0


def test_blobs_reads_many_files_in_one_git_each_by_its_bytes(tmp_path):
    """`git cat-file --batch`'s answers are sized in bytes: a file with multi-byte text, one with a
    newline at its end and none, a folder and a path that is not there, in the order asked."""
    from orchestrator.gitrun import blobs

    repo = make_repo(tmp_path / "repo", {"é.txt": "café ☕\nline\n", "bare.txt": "no newline", "d/x.txt": "x\n"})
    got = blobs(repo, ["HEAD:é.txt", "HEAD:missing.txt", "HEAD:d", "HEAD:bare.txt", "HEAD:d/x.txt"])
    assert got == ["café ☕\nline\n", None, None, "no newline", "x\n"]
    assert blobs(repo, []) == []
