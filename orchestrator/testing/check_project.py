"""A project whose check fails once, for end-to-end tests of a coding agent on the offline model.

The sample repository with `check_fix.py`: once `calc/other.py` exists, `calc/fix.py` must too,
and the check's failure says how to make it. The ticket (`t1`) asks for `calc/other.py`, so the
offline model writes its correction from the check's output: two turns, one correction."""

from __future__ import annotations

import shutil
from pathlib import Path

from orchestrator.testing.git import make_repo

CHECK_FIX = """import pathlib, sys
if not pathlib.Path("calc/other.py").exists() or pathlib.Path("calc/fix.py").exists():
    sys.exit(0)
print("calc/other.py needs calc/fix.py. Create `calc/fix.py` with:\\n```python\\nFIXED = True\\n```")
sys.exit(1)
"""
TICKET = "---\ntitle: Add other\nproject: calc\nid: t1\n---\nCreate `calc/other.py` with:\n```python\nOTHER = 1\n```\n"


def check_loop_project(root: Path, sample_repo: Path, *, check_file: bool = True) -> Path:
    """`root/repo`, a committed copy of `sample_repo` (with `check_fix.py` unless `check_file` is
    false), and `root/tickets/t1.md`; returns the repository. The caller writes `middle.toml`."""
    repo = root / "repo"
    shutil.copytree(sample_repo, repo)
    if check_file:
        (repo / "check_fix.py").write_text(CHECK_FIX)
    make_repo(repo)
    (root / "tickets").mkdir()
    (root / "tickets" / "t1.md").write_text(TICKET)
    return repo
