"""One coding-agent CLI process per turn, for every built-in agent: the one owner of how a turn's
process is started, watched, timed out, stopped and cleaned up.

What every agent gets from `TurnProcesses.run`:
- the CLI in a process group of its own (a timeout or a stop kills the whole group: its tool
  shells too) and killed by the kernel if `middle` dies, even by kill -9 (`die_with_parent`), the
  rest of its group with it (`group_guard`: a launcher's child doing the work);
- the orphan marker (`orphans.MARK_VAR`) in its environment, inherited by everything it starts,
  so a later `middle` can find and end a dead run's leftovers (`orphans.stop_marked`);
- its stdout handed over line by line as it comes (the agent parses its own event format), its
  stderr drained so the pipe never fills (the tail kept for error messages), each stderr line
  handed over too when the agent asks (`on_stderr`: a CLI that logs what it cannot do there);
- the turn timeout, and an agent that has answered but lingers (a background task it started)
  ended rather than waited for; so is one the agent says cannot finish (`stuck`: retrying a model
  API that went away), after a short grace, rather than at the timeout;
- `stop_all` (Ctrl-C, SIGTERM of a batch) ending every running turn, each of which then raises
  RunInterrupted.

Written by hand rather than with a library: the guarantees above (group kill, PDEATHSIG from the
waiting thread, the marker, draining after a detached grandchild holds stdout) are exactly what
generic subprocess wrappers leave out.
"""

from __future__ import annotations

import logging
import queue
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CodingAgentError, RunInterrupted
from ..procs.guarded import Guarded, kill_group
from .base import EventCallback

__all__ = ["LogWatch", "ProcessOutcome", "TurnProcesses", "kill_group", "safe_callback", "tail"]

log = logging.getLogger(__name__)

DRAIN_S = 5.0  # how long to keep reading stdout after the process is gone (or has answered)
STUCK_GRACE_S = 5.0  # how long a turn its agent says cannot finish is left to recover
_STDERR_KEEP = 64 * 1024


@dataclass
class ProcessOutcome:
    """How one turn's CLI process ended (what the agent's stdout said is the agent's to parse)."""

    exit_code: int | None
    stderr: str
    timed_out: bool
    elapsed_ms: int
    lingered: bool = False  # it answered, then stayed on and was ended by us (exit_code is then 0)
    stuck: str | None = None  # why it was ended as unable to finish (the agent's `stuck()` reason)


class TurnProcesses:
    """Runs one CLI process per turn and keeps the running ones (one per parallel ticket) so that
    `stop_all` can end every one of them. One instance per agent instance."""

    def __init__(self, agent_name: str):
        self.agent_name = agent_name  # for messages: "Claude Code", "Codex", ...
        self._lock = threading.Lock()
        self._live: dict[int, subprocess.Popen[bytes]] = {}
        self._stopped: dict[int, str] = {}

    def stop_all(self, why: str = "interrupted by the user") -> int:
        """Kill every running turn's process group; each of those `run` calls then raises
        RunInterrupted. Returns how many turns were stopped."""
        with self._lock:
            procs = list(self._live.values())
            for proc in procs:
                self._stopped[proc.pid] = why
        for proc in procs:
            kill_group(proc)
        return len(procs)

    def run(
        self,
        cmd: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: str | None,
        timeout_s: float,
        mark: str,
        on_line: Callable[[bytes], None],
        answered: Callable[[], bool] = lambda: False,
        stuck: Callable[[], str | None] = lambda: None,
        on_stderr: Callable[[bytes], None] | None = None,
        emit: EventCallback,
        start_event: dict[str, Any] | None = None,
        install_hint: str = "",
    ) -> ProcessOutcome:
        """Run `cmd` in `cwd` until it exits, times out or is stopped; `on_line` gets each stdout
        line as it comes. `mark` names the turn in the orphan marker (the session id the caller
        stored before launch, so a later `middle` can find these processes). `stdin` is written
        and closed (None: stdin is /dev/null). `answered()` says whether the agent's final answer
        has come: then a process that stays on is ended after a short drain. `stuck()` says why the
        turn cannot finish (None: it can): a reason said for STUCK_GRACE_S ends the process then
        (OpenCode logs each retry of a server that is gone; it would retry until the timeout).
        `on_stderr` gets each stderr line as it comes (from another thread). Raises
        CodingAgentError when the CLI cannot be started, RunInterrupted when stopped."""
        started = time.monotonic()
        try:
            guarded = Guarded.start(cmd, mark=mark, cwd=cwd, env=env,
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            hint = f" {install_hint}" if install_hint else ""
            raise CodingAgentError(f"{self.agent_name} could not be started ({cmd[0]}: {exc}).{hint}") from exc
        proc = guarded.proc
        with self._lock:
            self._live[proc.pid] = proc
        emit({"type": "start", "pid": proc.pid, **(start_event or {})})
        stderr_tail: deque[bytes] = deque()
        lines: queue.Queue[bytes | None] = queue.Queue()
        threads = [threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True),
                   threading.Thread(target=_drain, args=(proc.stderr, stderr_tail, on_stderr), daemon=True)]
        if stdin is not None:
            threads.append(threading.Thread(target=_feed_stdin, args=(proc, stdin), daemon=True))
        for t in threads:
            t.start()
        timed_out = lingered = False
        deadline = started + timeout_s
        gone_at: float | None = None  # when the process was first seen gone (or killed)
        answered_at: float | None = None
        stuck_at: float | None = None  # since when `stuck()` has said a reason
        gave_up: str | None = None
        try:
            while True:
                now = time.monotonic()
                if not timed_out and now >= deadline:
                    timed_out = True
                    emit({"type": "timeout", "after_s": timeout_s})
                    kill_group(proc)
                if answered_at is None and answered():
                    answered_at = now
                if gone_at is None and answered_at is not None and now - answered_at > DRAIN_S:
                    # Answered, but it stays on for a background task it started: end it rather
                    # than wait for the timeout.
                    emit({"type": "log", "line": f"{self.agent_name} answered but did not exit (a "
                                                 "background task?): ending it and what it started."})
                    lingered = True
                    kill_group(proc)
                    gone_at = now
                reason = stuck() if gone_at is None else None
                stuck_at = None if reason is None else stuck_at if stuck_at is not None else now
                if reason is not None and stuck_at is not None and now - stuck_at > STUCK_GRACE_S:
                    # It cannot finish (e.g. it retries a model API that is gone): end it now, not at
                    # the turn's timeout; the grace lets a server that comes straight back be seen.
                    emit({"type": "log", "line": f"{self.agent_name} cannot finish the turn ({reason}): "
                                                 "ending it and what it started."})
                    gave_up = reason
                    kill_group(proc)
                    gone_at = now
                if gone_at is None and proc.poll() is not None:
                    gone_at = now
                    # Leftovers in its group may hold stdout open; end them so EOF comes at once.
                    kill_group(proc)
                if gone_at is not None and now - gone_at > DRAIN_S and lines.empty():
                    break  # exited, but a detached grandchild holds stdout open: stop waiting
                try:
                    line = lines.get(timeout=max(0.02, min(deadline - now, 0.1)))
                except queue.Empty:
                    continue
                if line is None:
                    break
                on_line(line)
            exit_code: int | None
            try:
                exit_code = proc.wait(
                    timeout=DRAIN_S if gone_at is not None else max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:  # stdout closed but the process hung on
                timed_out = True
                emit({"type": "timeout", "after_s": timeout_s})
                kill_group(proc)
                exit_code = proc.poll()
            if lingered:
                exit_code = 0  # killed by us after its answer: the turn itself finished
        finally:
            # Ends the turn's leftovers too (shells it started in sessions of their own), and never
            # leaves a live process behind if we got here through an exception.
            guarded.end()
            with self._lock:
                self._live.pop(proc.pid, None)
                stopped = self._stopped.pop(proc.pid, None)
        if stopped is not None:
            raise RunInterrupted(stopped)
        threads[1].join(timeout=1.0)
        return ProcessOutcome(exit_code=exit_code, stderr=b"".join(stderr_tail).decode("utf-8", "replace"),
                              timed_out=timed_out, lingered=lingered, stuck=gave_up,
                              elapsed_ms=int((time.monotonic() - started) * 1000))


class LogWatch:
    """What a CLI's log (stderr) says that keeps its turn from finishing (OpenCode and the Gemini
    CLI retry a model API that went away, for minutes): `TurnProcesses.run`'s `on_stderr` and, with
    the agent's own "answered", its `stuck`. `words(line)` picks what to say of a line (None: the
    line says nothing of it); a later event on stdout (`progressed`) clears it: it got through.
    (One attribute written by the stderr thread and read by the waiting one: no lock needed.)"""

    def __init__(self, words: Callable[[str], str | None]) -> None:
        self._words = words
        self._said: str | None = None

    def on_stderr(self, line: bytes) -> None:
        said = self._words(line.decode("utf-8", "replace").strip())
        if said is not None:
            self._said = said

    def progressed(self) -> None:
        self._said = None

    def stuck(self, answered: bool) -> str | None:
        said = self._said
        return f"its log says {said!r}" if said is not None and not answered else None


def safe_callback(on_event: EventCallback | None) -> EventCallback:
    """A callback that cannot break the turn: a failing progress display is only logged."""

    def emit(event: dict[str, Any]) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:
            log.exception("progress callback failed on %s event; continuing the turn", event.get("type"))

    return emit


def tail(text: str, limit: int = 1000) -> str:
    """The end of `text` (stripped), with "..." when cut: for stderr in error messages."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _feed_stdin(proc: subprocess.Popen[bytes], text: str) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode("utf-8"))
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the process died before reading its prompt; its exit code tells the story


def _pump(stream: Any, lines: "queue.Queue[bytes | None]") -> None:
    try:
        for line in iter(stream.readline, b""):
            lines.put(line)
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)


def _drain(stream: Any, kept: deque[bytes], on_line: Callable[[bytes], None] | None = None) -> None:
    """Read stderr to the end so the pipe never fills and blocks the child; keep only the tail, and
    hand each whole line to `on_line` (a line longer than _STDERR_KEEP is handed over cut)."""
    size = 0
    partial = b""
    try:
        for chunk in iter(lambda: stream.read1(4096), b""):
            kept.append(chunk)
            size += len(chunk)
            while size > _STDERR_KEEP and len(kept) > 1:
                size -= len(kept.popleft())
            if on_line is not None:
                *whole, partial = (partial + chunk).split(b"\n")
                for line in whole:
                    _safely(on_line, line)
                if len(partial) > _STDERR_KEEP:
                    _safely(on_line, partial)
                    partial = b""
    except (OSError, ValueError):
        pass
    if on_line is not None and partial:
        _safely(on_line, partial)


def _safely(on_line: Callable[[bytes], None], line: bytes) -> None:
    try:
        on_line(line)
    except Exception:  # a reader's bug must not stop the draining (the pipe would fill)
        log.exception("reading a stderr line failed; continuing the turn")
