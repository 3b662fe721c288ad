"""The project's checks: run a check command, compare it with the base commit, and make a worktree able to run them."""
