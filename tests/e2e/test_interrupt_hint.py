"""After SIGTERM, the hint repeats how the run was started (`--config X`, `--fake`), and works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_helpers import fresh_project

from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))

# Blocks `git worktree add` (post-checkout runs in the new worktree) until the test says so: the
# run is then certainly under way when SIGTERM arrives, whatever the machine's speed.
HOOK = """#!/bin/sh
touch "{mark}"
i=0
while [ ! -f "{release}" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}


def test_sigterm_hint_repeats_config_and_fake_and_the_hint_resumes_without_an_api_key(tmp_path, claude_cli):
    repo = fresh_project(tmp_path, {"t1.md": "---\ntitle: One file\nproject: calc\nid: t1\n---\n"
                                              "Create `a.txt` with:\n```\na\n```\n"})
    (tmp_path / "other.toml").write_text(
        'state_dir = "state"\n[project]\npath = "repo"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 120\n')
    mark, release = tmp_path / "in-checkout", tmp_path / "release"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(HOOK.format(mark=mark, release=release))
    hook.chmod(0o755)
    proc = subprocess.Popen([MIDDLE, "--config", "other.toml", "run", "--fake", "t1"], cwd=tmp_path,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):  # until the run is inside `git worktree add`
            if mark.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert mark.exists(), proc.communicate(timeout=5)
        proc.send_signal(signal.SIGTERM)
        release.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "interrupted: middle --config other.toml resume t1 --fake" in err, err
    with TicketStore(tmp_path / "state" / "middle.sqlite3") as store:
        reason = store.get_ticket("t1").status_reason
        assert "`middle --config other.toml resume t1 --fake`" in reason, reason
    hook.unlink()
    hint = err.split("interrupted: ", 1)[1].split()
    assert hint[0] == "middle"
    hint[0] = MIDDLE  # the same `middle`, also when the venv is not on PATH
    done = subprocess.run(hint, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "complete ticket t1" in done.stdout, (done.stdout, done.stderr)
