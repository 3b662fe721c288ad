"""The git questions the ticket workspace asks (branches, merges, worktrees), one function each.

git itself is run by `orchestrator.gitrun` (`git`, `out`, errors as GitError), re-exported here
for the workspace code and its callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import GitError
from orchestrator.gitrun import git, out  # re-exported: the workspace's callers run git through them

FALLBACK_NAME, FALLBACK_EMAIL = "middle-agent", "middle@localhost"


def toplevel(path: Path) -> Path:
    """The working tree root that holds `path`; a clear error when it is not in a repository."""
    proc = git(path, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0 and inside_git_dir(path):
        raise GitError(no_work_tree_message(path))
    if proc.returncode != 0:
        raise GitError(
            f"{path} is not in a git repository, and tickets run on their own git branch: run "
            "`git init && git add -A && git commit -m 'initial'` there, or set [project] "
            "isolation = \"none\" in middle.toml to let tickets edit the directory in place")
    root = Path(proc.stdout.strip())
    if git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).returncode != 0:
        raise GitError(
            f"the git repository at {root} has no commit yet, and a ticket's branch starts from "
            "one: commit your files first (`git add -A && git commit -m 'initial'`), or set "
            "[project] isolation = \"none\"")
    return root


def inside_git_dir(path: Path) -> bool:
    """Whether `path` is a bare repository or inside a `.git` folder: git, but no working tree
    for a ticket to branch from (`git init` there, as the other message says, would not help)."""
    proc = git(path, "rev-parse", "--is-inside-git-dir", check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def no_work_tree_message(path: Path) -> str:
    return (f"{path} is a bare git repository (or inside a .git folder): it has no working tree for "
            f"tickets to branch from; clone it (`git clone {path} my-project`) and use middle in the clone")


def current_branch(repo: Path) -> str | None:
    """The branch checked out in `repo`, or None on a detached HEAD."""
    proc = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def ref_commit(repo: Path, ref: str) -> str | None:
    """The commit a ref (e.g. refs/heads/main, refs/remotes/origin/x) points at, or None."""
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def branch_commit(repo: Path, branch: str) -> str | None:
    return ref_commit(repo, f"refs/heads/{branch}")


def branches(repo: Path, pattern: str = "") -> list[str]:
    args = ["for-each-ref", "--format=%(refname:short)", "refs/heads/" + pattern]
    return [b for b in out(repo, *args).splitlines() if b]


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return git(repo, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


def has_object(repo: Path, sha: str) -> bool:
    return git(repo, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


@dataclass(frozen=True)
class TreeMerge:
    """The result of a three-way merge computed without touching any working tree."""

    tree: str | None  # the merged tree, when there was no conflict
    conflicts: list[str]  # paths that conflict (empty when clean)


def merge_trees(repo: Path, ours: str, theirs: str) -> TreeMerge:
    """`git merge-tree --write-tree` (git 2.38+): the merged tree, or the conflicting paths."""
    args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z"]
    proc = git(repo, *args, ours, theirs, check=False)
    if proc.returncode not in (0, 1):
        if "unknown option" in proc.stderr or "usage" in proc.stderr:
            raise GitError("this git is too old for merging without a working tree (git 2.38 or "
                           f"newer is needed): {proc.stderr.strip()}")
        raise GitError(f"git merge-tree failed in {repo}: {proc.stderr.strip()}")
    fields = proc.stdout.split("\0")
    tree = fields[0].strip()
    if proc.returncode == 0:
        return TreeMerge(tree, [])
    conflicts = sorted({f for f in fields[1:] if f})
    return TreeMerge(None, conflicts)


def author_args(repo: Path) -> list[str]:
    """`-c user.name=... -c user.email=...` when git config has none, so a commit never fails."""
    args = []
    if not git(repo, "config", "user.name", check=False).stdout.strip():
        args += ["-c", f"user.name={FALLBACK_NAME}"]
    if not git(repo, "config", "user.email", check=False).stdout.strip():
        args += ["-c", f"user.email={FALLBACK_EMAIL}"]
    return args


SUBJECT_MAX = 72  # git's own advice: `git log --oneline`, GitHub and mail clients cut longer ones


def commit_message(subject: str, body: str = "") -> str:
    """A commit message whose subject is one short line; a longer subject goes whole into the body."""
    line = " ".join(subject.split())
    if len(line) > SUBJECT_MAX or line != subject.strip():
        body = subject.strip() + ("\n\n" + body.strip() if body.strip() else "")
        if len(line) > SUBJECT_MAX:
            line = line[:SUBJECT_MAX - 1].rstrip() + "…"
    return f"{line}\n\n{body.strip()}\n" if body.strip() else f"{line}\n"


def merge_base(repo: Path, a: str, b: str) -> str | None:
    """The best common ancestor of two commits, or None when they share no history."""
    proc = git(repo, "merge-base", a, b, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def commit_tree(repo: Path, tree: str, parents: list[str], message: str) -> str:
    """A commit object for `tree` (no working tree or ref touched); returns its sha."""
    args = [*author_args(repo), "commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return git(repo, *args, "-F", "-", input=message).stdout.strip()


def numstat(repo: Path | str, *revs: str, cached: bool = False) -> list[dict[str, Any]]:
    """`git diff --numstat` as [{"path", "added", "deleted"}] (binary files count as None)."""
    args = ["diff", "--numstat", "-z", "--no-renames", "--no-ext-diff"]
    if cached:
        args.append("--cached")
    text = git(repo, *args, *revs).stdout
    rows = []
    for item in text.split("\0"):
        if not item:
            continue
        added, deleted, path = item.split("\t", 2)
        rows.append({"path": path, "added": None if added == "-" else int(added),
                     "deleted": None if deleted == "-" else int(deleted)})
    return rows


def dirty_paths(worktree: Path) -> set[str]:
    """Paths with uncommitted changes (staged, unstaged or untracked) in a working tree."""
    text = git(worktree, "status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
    paths: set[str] = set()
    items = text.split("\0")
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if len(item) < 4:
            continue
        paths.add(item[3:])
        if item[0] in "RC":  # a rename or copy: the next field is the old path
            paths.add(items[i])
            i += 1
    return paths


def untracked_paths(worktree: Path) -> list[str]:
    """Files in a working tree that git does not track and does not ignore."""
    text = git(worktree, "ls-files", "--others", "--exclude-standard", "-z").stdout
    return sorted(p for p in text.split("\0") if p)


def checked_out_at(repo: Path, branch: str) -> Path | None:
    """The working tree where `branch` is checked out (the user's, usually), or None."""
    want = f"branch refs/heads/{branch}"
    path = None
    for line in out(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree "):])
        elif line == want and path is not None:
            return path
    return None
