"""Pull requests out: `middle pr`, `[run] on_complete = "pr"`, and pull-request states read back by sync."""
