"""`middle bench fleet`: `middle worker` processes on one PostgreSQL store, and claims under load.

- Throughput: for each worker count, a fresh database and bare remote, N one-turn tickets filed
  with `middle sync`, then that many `middle worker --once --fake` processes (each its own clone).
  Reported: tickets per minute, Claude Code's own time per ticket, the framework's time inside
  each run, and the coordination overhead per ticket (worker time spent outside any run: start-up,
  clone and fetch, claiming, waiting) = (sum of worker wall times - sum of run wall times) / N.
  Also: the most store connections one worker process held at once (sampled from
  pg_stat_activity, by the process's application_name), run events per second, and how often an
  idle process waiting as a worker does (`wait_for_runnable`) was woken per run event written.
- Claims: C claimers (threads spread over processes, each its own pooled connection) take a
  backlog of pending tickets with `claim_next` until it is empty: each claim timed, and the
  store transactions per claimed ticket counted.
- Claims behind a blocked backlog (`--blocked`): for each count B, B pending tickets that wait
  for a dependency that never lands, filed before the runnable ones, then one claimer taking the
  runnable ones back to back, and 100 claimers at a worker's pace over the claims backlog with
  half of it blocked: a claim should cost the same whatever waits behind it.
- Events: W processes each append run events to a run of their own for a few seconds: events
  per second should grow with writers (no database-wide lock).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import click

from orchestrator.bench.metrics import percentile
from orchestrator.errors import ConfigError


def _seconds(a: str, b: str | None) -> float:
    if b is None:  # still running (a bench reads ended runs only)
        return 0.0
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _server(store_url: str | None) -> tuple[Any, Callable[[], str], Callable[[], None]]:
    """(server or None, make a fresh database URL, stop)."""
    from orchestrator.testing import postgres

    if store_url:
        return None, lambda: store_url, lambda: None
    why = postgres.available()
    if why:
        raise ConfigError(f"no PostgreSQL to measure on: {why}; or pass --store-url postgresql://...")
    server = postgres.start_server()
    import psycopg

    with psycopg.connect(server.admin_url, autocommit=True) as conn:  # room for 100 claimers
        conn.execute("ALTER SYSTEM SET max_connections = 300")
    server.restart()
    return server, server.create_database, server.stop


def _fleet(root: Path, url: str, tickets: int, claude_cli: str | None) -> tuple[Path, Path]:
    from orchestrator.testing.git import make_repo
    from orchestrator.workspace.git import git

    seed = make_repo(root / "seed", {"calc/__init__.py": "", "README.md": "calc\n"})
    remote = root / "remote.git"
    git(root, "clone", "--quiet", "--bare", str(seed), str(remote))
    desk = root / "desk"
    git(root, "clone", "--quiet", str(remote), str(desk))
    (desk / "tickets").mkdir()
    for i in range(tickets):
        (desk / "tickets" / f"t{i:03d}.md").write_text(
            f"---\ntitle: Module {i}\nproject: calc\nid: t{i:03d}\n---\n"
            f"Create `calc/m{i:03d}.py` with:\n```python\nVALUE = {i}\n```\n")
    cli = f'cli_path = "{claude_cli}"\n' if claude_cli else ""
    (desk / "middle.toml").write_text(
        f'[store]\nurl = "{url}"\n[project]\npath = "."\nrepo_url = "{remote}"\nbase_branch = "main"\n'
        f'[coding_agent.options]\nturn_timeout_s = 300\n{cli}')
    return remote, desk


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}


class _Watch:
    """While workers run: the most connections each process held, and an idle waiter's wake-ups."""

    def __init__(self, url: str):
        import threading

        from tickets.store import TicketStore

        self.url, self.wakeups = url, 0
        self.most: dict[str, int] = {}
        self.stop = threading.Event()
        self.idle = TicketStore(url)
        self.idle.runnable_seen()  # listening before the workers start
        self.threads = [threading.Thread(target=self._sample, daemon=True),
                        threading.Thread(target=self._wait, daemon=True)]
        for t in self.threads:
            t.start()

    def _sample(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                for name, n in conn.execute(
                        "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND application_name LIKE 'middle-%%' GROUP BY application_name").fetchall():
                    self.most[name] = max(self.most.get(name, 0), n)
                self.stop.wait(0.05)

    def _wait(self) -> None:
        while not self.stop.is_set():
            if self.idle.wait_for_runnable(0.5):
                self.wakeups += 1

    def close(self, pids: list[int]) -> int:
        """The most connections any of those processes held at once."""
        self.stop.set()
        for t in self.threads:
            t.join(5)
        self.idle.close()
        return max((self.most.get(f"middle-{pid}", 0) for pid in pids), default=0)


def measure_workers(url: str, workers: int, tickets: int, claude_cli: str | None = None) -> dict[str, Any]:
    from tickets.store import TicketStore

    root = Path(tempfile.mkdtemp(prefix="middle-bench-fleet-"))
    try:
        _, desk = _fleet(root, url, tickets, claude_cli)
        middle = [sys.executable, "-m", "orchestrator.cli.main"]
        subprocess.run([*middle, "sync"], cwd=desk, env=_env(), check=True, capture_output=True)
        homes = []
        for k in range(workers):
            home = root / f"w{k}"
            home.mkdir()
            (home / "middle.toml").write_text((desk / "middle.toml").read_text())
            homes.append(home)
        watch = _Watch(url)
        started = time.perf_counter()
        procs = [subprocess.Popen([*middle, "worker", "--once", "--fake", "--parallel", "1"], cwd=h,
                                  env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for h in homes]
        walls = []
        for p in procs:
            out = p.communicate()[0]
            walls.append(time.perf_counter() - started)
            if p.returncode != 0:
                raise ConfigError(f"a benchmark worker failed ({p.returncode}): {out.decode()[-800:]}")
        wall = max(walls)
        connections = watch.close([p.pid for p in procs])
        with TicketStore(url, readonly=True) as store:
            runs = [r for t in store.list_tickets() for r in store.list_runs(t.id)]
            turns = [t for r in runs for t in store.list_turns(run_id=r["id"])]
            events = len(store.list_events(limit=10_000_000))
        if len(runs) != tickets or any(r["status"] != "complete" for r in runs):
            raise ConfigError(f"expected {tickets} complete runs, found {[r['status'] for r in runs]}")
        in_runs = sum(_seconds(r["started_at"], r["ended_at"]) for r in runs)
        claude = sum(_seconds(t["started_at"], t["ended_at"]) for t in turns)
        return {"backend": f"{workers} worker(s)", "workers": workers, "tickets": tickets, "wall_s": wall,
                "tickets_per_min": tickets / wall * 60, "claude_code_s_per_ticket": claude / tickets,
                "framework_s_per_ticket": (in_runs - claude) / tickets,
                "coordination_s_per_ticket": (sum(walls) - in_runs) / tickets,
                "connections_per_worker": connections, "events_per_s": events / wall,
                "idle_wakeups_per_event": watch.wakeups / max(events, 1)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _claimer(url: str, threads: int, start_at: float, pause_s: float, out: Any) -> None:
    """`threads` claimers on one process's pool, taking tickets until none is left, each pausing
    `pause_s` after a claim (a worker works its ticket before it claims the next)."""
    import threading

    from tickets.store import TicketStore

    times: list[float] = []
    counts = {"won": 0, "transactions": 0}
    lock = threading.Lock()
    with TicketStore(url) as store:
        store.size_pool(threads)
        def counted(real: Any) -> Any:
            def call(*args: Any) -> Any:
                with lock:
                    counts["transactions"] += 1
                return real(*args)
            return call

        # Every transaction the store opens: a write, or one statement in its own (PostgreSQL).
        store._db.write = counted(store._db.write)  # type: ignore[method-assign]
        store._db.statement = counted(store._db.statement)  # type: ignore[method-assign]

        def claim() -> None:
            while True:
                t = time.perf_counter()
                new = store.claim_next(dependencies="merged")
                with lock:
                    times.append((time.perf_counter() - t) * 1000)
                    if new is None:
                        return
                    counts["won"] += 1
                time.sleep(pause_s)

        time.sleep(max(0.0, start_at - time.time()))
        workers = [threading.Thread(target=claim) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    out.put((times, counts["won"], counts["transactions"], time.time()))


def _collect(procs: list[Any], out: Any, what: str) -> list[Any]:
    """One result per process, failing fast (not after a long timeout) when one of them died."""
    import queue

    results: list[Any] = []
    deadline = time.time() + 900
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=2))
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.time() > deadline:
                why = f"exit codes {dead}" if dead else "timed out"
                raise ConfigError(f"a benchmark {what} process failed ({why})") from None
    for p in procs:
        p.join(60)
    return results


_OLDER = "2000-01-01T00:00:00.000Z"  # the blocked backlog is filed before every runnable ticket


def _file_backlog(url: str, tickets: int, blocked: int) -> None:
    """`tickets` runnable pending tickets, after `blocked` pending ones that wait for a ticket that
    failed (so never runnable), in one transaction: filing is not what is measured."""
    from tickets.model import utc_now
    from tickets.runnable import recompute_deps_met
    from tickets.store import TicketStore

    def insert(conn: Any, tid: str, status: str, created: str) -> None:
        conn.execute("INSERT INTO tickets (id, project_id, title, project_path, status, created_at,"
                     " updated_at) VALUES (?, 'bench', ?, '/tmp', ?, ?, ?)", (tid, tid, status, created, created))

    with TicketStore(url) as store:
        with store._db.write() as conn:
            if blocked:
                insert(conn, "gate", "failed", _OLDER)
            for i in range(blocked):
                insert(conn, f"b{i:05d}", "pending", _OLDER)
                conn.execute("INSERT INTO ticket_deps (ticket_id, depends_on) VALUES (?, 'gate')", (f"b{i:05d}",))
            for i in range(tickets):
                insert(conn, f"c{i:05d}", "pending", utc_now())
            recompute_deps_met(conn)  # as the store's own writes would have left it


def measure_claims(url: str, claimers: int, tickets: int, processes: int = 10,
                   pause_ms: float = 0.0, blocked: int = 0) -> dict[str, Any]:
    """`claimers` threads over `processes` processes take a backlog of `tickets` pending ones,
    each pausing `pause_ms` after a claim (0: back to back, the store's most claims a second),
    with `blocked` more, older, pending tickets that wait for a dependency that never lands."""
    import multiprocessing as mp

    _file_backlog(url, tickets, blocked)
    processes = max(1, min(processes, claimers))
    split = [claimers // processes + (1 if k < claimers % processes else 0) for k in range(processes)]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 5.0  # every process connected before the race starts
    procs = [ctx.Process(target=_claimer, args=(url, n, start_at, pause_ms / 1000, out)) for n in split]
    for p in procs:
        p.start()
    results = _collect(procs, out, "claimer")
    times = [t for ts, *_ in results for t in ts]
    won = sum(r[1] for r in results)
    transactions = sum(r[2] for r in results)
    wall = max(r[3] for r in results) - start_at
    if won != tickets:
        raise ConfigError(f"{won} claims won for {tickets} tickets: a ticket was claimed twice or never")
    name = f"{claimers} claimer{'s' if claimers > 1 else ''}, {pause_ms:g} ms apart"
    if blocked:
        name += f", {blocked:,} blocked"
    return {"backend": name, "claimers": claimers, "tickets": tickets, "blocked": blocked,
            "pause_ms": pause_ms, "attempts": len(times), "claims_won": won, "claims_per_s": won / wall,
            "claim_p50_ms": percentile(times, 50), "claim_p95_ms": percentile(times, 95),
            "transactions_per_claim": transactions / won}


def _event_writer(url: str, run_id: str, seconds: float, start_at: float, out: Any) -> None:
    from tickets.store import TicketStore

    with TicketStore(url) as store:
        ticket = store.get_run(run_id)["ticket_id"]
        time.sleep(max(0.0, start_at - time.time()))
        n, end = 0, time.time() + seconds
        while time.time() < end:
            store.add_event(run_id, ticket, "note", {"text": f"step {n}"})
            n += 1
    out.put(n)


def measure_events(url: str, writers: int, seconds: float = 5.0) -> dict[str, Any]:
    """`writers` processes, each appending events to its own run (its own ticket) for `seconds`."""
    import multiprocessing as mp

    from tickets.model import Ticket
    from tickets.store import TicketStore

    with TicketStore(url) as store:
        runs = []
        for k in range(writers):
            tid = f"e{writers}-{k}"
            store.upsert_ticket(Ticket(id=tid, project_id="bench", title=tid, project_path="/tmp"))
            runs.append(store.claim_new_run(tid, ["pending"]))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 3.0
    procs = [ctx.Process(target=_event_writer, args=(url, r, seconds, start_at, out)) for r in runs]
    for p in procs:
        p.start()
    total = sum(_collect(procs, out, "event writer"))
    return {"backend": f"{writers} writer(s)", "writers": writers, "events": total, "events_per_s": total / seconds}


def measure_blocked(fresh: Callable[[], str], counts: list[int], claimers: int, claim_tickets: int,
                    pause_ms: float, runnable: int = 1000) -> list[dict[str, Any]]:
    """Claims behind a blocked backlog: one claimer back to back over `runnable` tickets behind
    each count of blocked ones; then `claimers` at `pause_ms` over `claim_tickets`, half blocked."""
    rows = [measure_claims(fresh(), 1, runnable, processes=1, blocked=n) for n in counts]
    half = claim_tickets // 2
    rows.append(measure_claims(fresh(), claimers, claim_tickets - half, pause_ms=pause_ms, blocked=half))
    return rows


def _blocked_counts(text: str) -> list[int]:
    try:
        values = [int(v.strip().replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise click.BadParameter(f"{text!r}: give counts of blocked tickets, comma-separated, e.g. 0,1000,5000",
                                 param_hint="--blocked")
    return values


def _pauses(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise click.BadParameter(f"{text!r}: give milliseconds, comma-separated, e.g. 200,0",
                                 param_hint="--claim-pause-ms")
    return values


@click.command()
@click.option("--workers", default="1,2,4", show_default=True, help="Worker counts, comma-separated.")
@click.option("--tickets", type=click.IntRange(1, 500), default=12, show_default=True)
@click.option("--claimers", type=click.IntRange(1, 200), default=100, show_default=True,
              help="Claimers racing for the backlog (threads over up to 10 processes).")
@click.option("--claim-tickets", type=click.IntRange(1, 50_000), default=10_000, show_default=True)
@click.option("--claim-pause-ms", default="200,0", show_default=True,
              help="Each claimer's pause after a claim, comma-separated runs (a worker works before it claims "
              "again; 0: back to back, the most claims a second).")
@click.option("--blocked", default=None,
              help="Also measure claims behind this many blocked pending tickets, comma-separated (e.g. "
              "0,1000,5000): one claimer per count, then the claimers at the first pause with half the backlog "
              "blocked.")
@click.option("--writers", default="1,2,4", show_default=True, help="Event writer counts, comma-separated.")
@click.option("--store-url", default=None, help="A PostgreSQL server to use (default: start the bundled one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def fleet(workers: str, tickets: int, claimers: int, claim_tickets: int, claim_pause_ms: str, blocked: str | None,
          writers: str, store_url: str | None, as_json: bool) -> None:
    """`middle worker` processes on one PostgreSQL store: throughput, claims, events, connections."""
    import json

    from orchestrator.bench.report import console, positive_ints
    from orchestrator.bench.report import table as _table

    counts = positive_ints(workers, "1,2,4", "--workers")
    writer_counts = positive_ints(writers, "1,2,4", "--writers")
    pauses = _pauses(claim_pause_ms)
    blocked_counts = _blocked_counts(blocked) if blocked is not None else []
    _, fresh, stop = _server(store_url)
    try:
        rows = [measure_workers(fresh(), n, tickets) for n in counts]
        claims = [measure_claims(fresh(), claimers, claim_tickets, pause_ms=p) for p in pauses]
        behind = measure_blocked(fresh, blocked_counts, claimers, claim_tickets, pauses[0]) if blocked_counts else []
        events = [measure_events(fresh(), n) for n in writer_counts]
    finally:
        stop()
    report = {"dataset": f"{tickets} one-turn tickets on the built-in fake model", "kind": "fleet",
              "results": rows, "claims": claims, "blocked": behind, "events": events}
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    console.print(_table(f"fleet benchmark: {report['dataset']}", rows,
                         ["backend", "wall_s", "tickets_per_min", "claude_code_s_per_ticket",
                          "framework_s_per_ticket", "coordination_s_per_ticket", "connections_per_worker",
                          "events_per_s", "idle_wakeups_per_event"], label="workers"))
    console.print(_table(f"claims: {claim_tickets} pending tickets, {claimers} claimers racing", claims,
                         ["backend", "attempts", "claims_won", "claims_per_s", "claim_p50_ms", "claim_p95_ms",
                          "transactions_per_claim"], label="claimers"))
    if behind:
        console.print(_table("claims behind a blocked backlog (pending tickets waiting for a failed one)", behind,
                             ["backend", "tickets", "blocked", "claims_won", "claims_per_s", "claim_p50_ms",
                              "claim_p95_ms", "transactions_per_claim"], label="claimers"))
    console.print(_table("run events: each writer on a run of its own", events,
                         ["backend", "events", "events_per_s"], label="writers"))
