"""Decisions go in, offline and end to end: the real `middle` CLI and the real Claude Code CLI on
the built-in fake model; the completion doc and `middle log` carry the ticket's rules."""

from __future__ import annotations

import json

import pytest
from test_worktree_flow import middle, setup

pytestmark = [pytest.mark.cli, pytest.mark.slow]

TICKET = ("t1.md", "---\ntitle: Create calc/tabs.py\nproject: calc\nid: t1\n---\n"
                   "Create `calc/tabs.py` with:\n```python\nSTYLE = 'tabs'\n```\n\n"
                   "Indent with tabs, never spaces. Do not use black: we decided against it because "
                   "it rewrites whole files.\n")


def test_the_offline_run_records_decisions_and_instructions(tmp_path, claude_cli):
    setup(tmp_path, claude_cli, [TICKET])
    middle(tmp_path, "run", "--fake")
    log = middle(tmp_path, "log", "t1").stdout
    assert "    rejected:\n      - Do not use black: we decided against it because it rewrites whole files." in log
    assert "    the human's instructions:\n      - Indent with tabs, never spaces." in log
    (doc,) = json.loads(middle(tmp_path, "memory", "export").stdout)["docs"]
    assert "\nRejected: Do not use black: we decided against it because it rewrites whole files.\n" in doc
    assert "\nThe human's instructions: Indent with tabs, never spaces; Do not use black" in doc
