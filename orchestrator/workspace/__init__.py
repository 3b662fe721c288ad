"""A ticket as a unit of code change: its git worktree and branch, and review (diff, merge, revert)."""

from orchestrator.workspace.review import Review, ReviewResult, UntrackedFiles, split_patch
from orchestrator.workspace.worktrees import Workspace, Worktrees, branch_name

__all__ = ["Review", "ReviewResult", "UntrackedFiles", "Workspace", "Worktrees", "branch_name", "split_patch"]
