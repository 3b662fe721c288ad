"""Run one check command in a worktree: its exit code, time, the tail of its output, and the test
ids a pytest run reports failing.

A command is a shell line (`python -m pytest -q`, `npm test && npm run lint`), run by `sh -c` in a
process group of its own, so a timeout kills everything it started. Its output goes to a file,
not to memory (a test suite can print megabytes), and the tail is what the middle agent reads.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# What the middle agent reads of a failing check: the end of its output, where test runners put
# their summary. Enough for a few tracebacks, little enough to leave room for the conversation.
TAIL_CHARS = 4000
# `sh` answers 127 for a command it cannot find and 126 for one it cannot execute: a check
# that cannot start is a mistake in [check] commands, not a round.
CANNOT_START = (126, 127)
# pytest's short test summary: `FAILED tests/test_x.py::test_y - AssertionError...` (and ERROR
# for a test that could not be set up); the node id is what a run is compared by.
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$", re.M)
KILL_GRACE_S = 5.0


@dataclass
class CheckResult:
    """One run of one check command."""

    command: str
    exit_code: int | None  # None: it timed out and was killed
    duration_s: float
    tail: str  # the end of its output (stdout and stderr, in order)
    timed_out: bool = False
    failing: list[str] | None = None  # pytest's failing test ids; None when the output names none
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def cannot_start(self) -> bool:
        return self.exit_code in CANNOT_START

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CheckResult":
        return cls(**{k: data[k] for k in ("command", "exit_code", "duration_s", "tail", "timed_out", "failing")
                      if k in data})


def failing_tests(output: str) -> list[str] | None:
    """The test ids a pytest run names as failed or errored, sorted; None when it names none."""
    found = sorted(set(_PYTEST_FAILED.findall(output)))
    return found or None


def run_check(command: str, cwd: Path | str, *, timeout_s: float, env: dict[str, str] | None = None,
              run_id: str | None = None) -> CheckResult:
    """Run `command` in `cwd` under `sh -c`, at most `timeout_s` seconds (then its whole process
    group is killed). Like Claude Code, it dies with this process (even by kill -9), and, with
    `run_id`, carries the run's marker, so whoever takes a dead run over stops what it left."""
    from orchestrator.coding_agent.orphans import MARK_VAR, check_mark, die_with_parent, own_mark

    started = time.monotonic()
    environ = {**os.environ, **(env or {})}
    if run_id:
        environ[MARK_VAR] = own_mark(check_mark(run_id))
    with tempfile.TemporaryFile() as out:
        # The outer sh gets SIGUSR1 from the kernel when this process dies (even by kill -9) and
        # its trap kills its whole process group: the check's own children too (a test runner's
        # workers), which a parent-death signal to the sh alone would leave running.
        guard = 'trap "kill -KILL 0" USR1; sh -c "$1" & wait $!'
        proc = subprocess.Popen(["sh", "-c", guard, "middle-check", command], cwd=str(cwd), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environ,
                                start_new_session=True, preexec_fn=die_with_parent(signal.SIGUSR1))
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out, code = True, None
            _kill_group(proc)
        except BaseException:  # Ctrl-C, a stop: the check does not outlive its run
            _kill_group(proc)
            raise
        duration = time.monotonic() - started
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    tail = text[-TAIL_CHARS:] if len(text) > TAIL_CHARS else text
    if timed_out:
        tail += f"\n[the check did not finish within {timeout_s:g}s and was stopped]"
    return CheckResult(command, code, round(duration, 3), tail, timed_out, failing_tests(text))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the check's process group, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
