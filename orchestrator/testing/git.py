"""A real git repository for tests: tickets run on their own branch, so a project must be one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.workspace.git import author_args, git, out


def make_repo(path: str | Path, files: dict[str, str] | None = None, *, branch: str = "main") -> Path:
    """`git init` at path (made if missing), write `files`, and commit everything once."""
    repo = Path(path)
    repo.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    if not (repo / ".git").exists():
        git(repo, "init", "--quiet", f"--initial-branch={branch}")
    if not any(p.name != ".git" for p in repo.iterdir()):
        (repo / "README.md").write_text("# test project\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, *author_args(repo), "commit", "--quiet", "--no-verify", "--allow-empty", "-m", "initial")
    return repo


def commit_all(repo: str | Path, message: str = "change") -> str:
    """Commit every change in the working tree; returns the new commit's sha."""
    git(repo, "add", "-A")
    git(repo, *author_args(Path(repo)), "commit", "--quiet", "--no-verify", "-m", message)
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def snapshot(repo: Path) -> dict[str, Any]:
    """Everything a user could notice: branch tips, HEAD, index and working-tree files."""
    files = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*")
             if p.is_file() and ".git" not in p.parts}
    return {"refs": out(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
            "head": out(repo, "rev-parse", "HEAD"), "status": out(repo, "status", "--porcelain"),
            "files": files}
