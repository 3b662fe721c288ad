"""The `middle` command. The only place errors become user output: one line, non-zero exit."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NoReturn

import click

from orchestrator.cli.context import TicketsAtOnce
from orchestrator.cli.output import (
    console,
    err_console,
    make_table,
    on_event,
    print_each,
    report,
    safe,
    say,
    shorten,
    summary_line,
)
from orchestrator.errors import MiddleError, TicketError
from orchestrator.names import CONFIG_FILE, DEFAULT_BACKEND

if TYPE_CHECKING:
    from orchestrator.config.memo import ReadConfig
    from orchestrator.config.settings import Config
    from orchestrator.plugins.memory_backend import MemoryBackend
    from tickets.store import TicketStore


def get_config(ctx: click.Context, *, required: bool = True) -> Config:
    """The config of this invocation (see orchestrator.cli.context; imported when needed)."""
    from orchestrator.cli.context import get_config as load

    return load(ctx, required=required)


def read_config(ctx: click.Context) -> ReadConfig:
    """What `middle tickets` and `middle log` need of the config, validated without pydantic
    when the config is unchanged since it was last validated (orchestrator.config.memo)."""
    from orchestrator.config.memo import read_config as load
    from orchestrator.plugins.manager import check_options

    return load((ctx.find_root().obj or {}).get("config_path"), check=check_options)


def read_store(ctx: click.Context, config: ReadConfig) -> Any:
    """The ticket store opened read-only for this command (None before any run), closed at its end."""
    from tickets.store import open_read_only

    store = open_read_only(config.store_target, config.reconnect_s)
    if store is not None:
        ctx.call_on_close(store.close)
    return store


def services(ctx: click.Context, config: Config, **kwargs: Any) -> Any:
    """The services of this invocation, closed when the command ends."""
    from orchestrator.cli.context import services as build

    return build(ctx, config, **kwargs)


# Read-only commands that start in a fraction of the others' time (within 2x of importing click and
# rich): they import no pydantic, YAML or logging (a warning they log is then printed unformatted).
QUICK_COMMANDS = frozenset({"tickets", "log"})
EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by Ctrl-C (SIGINT)


# Subcommands that live in their own modules, imported only when used, so `middle --help`,
# `middle tickets` and `middle log` do not import the server (FastAPI), the benchmarks or the
# memory stack. The short help is kept here so `--help` can list them without importing.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "diff": ("orchestrator.cli.review:diff", "Show a ticket's change: its branch against the commit it started from."),
    "merge": ("orchestrator.cli.review:merge", "Merge a complete ticket's branch into the base branch."),
    "discard": ("orchestrator.cli.review:discard", "Drop an unmerged ticket's work: worktree, branch, memory doc."),
    "revert": ("orchestrator.cli.review:revert", "Undo a ticket: a revert commit if merged (else discard)."),
    "gc": ("orchestrator.cli.review:gc", "Remove worktrees and branches that no ticket needs any more."),
    "feedback": ("orchestrator.cli.feedback:feedback", "Ask for changes: continue a finished ticket on its branch."),
    "memory": ("orchestrator.cli.memory:memory", "Search, list, add, delete and export project memory."),
    "bench": ("orchestrator.bench.cli:bench", "Measure memory backends and whole runs (recall, latency, wall time)."),
    "demo": ("orchestrator.cli.demo:demo", "Run the sample backlog offline with a real coding agent CLI (--agent)."),
    "serve": ("orchestrator.server.serve:serve", "Serve the dashboard, the tickets and memory API, live run events."),
    "worker": ("orchestrator.cli.fleet:worker", "Work the shared backlog on this machine (claim, run, push)."),
    "pr": ("orchestrator.cli.pr:pr", "Open a complete ticket's pull request on GitHub (pushes its branch)."),
    "doctor": ("orchestrator.cli.doctor:doctor", "Say which coding agent and model a run uses, and if each works."),
    "agents": ("orchestrator.cli.agents:agents", "List the coding agents, their options, and whether each CLI is here"),
}


def _has_entry_point_plugins() -> bool:
    """Whether an installed plugin that will load could add top-level commands."""
    import os

    from orchestrator.names import LOAD_PLUGINS_VARIABLE
    from orchestrator.plugins.index import installed_plugins

    if os.environ.get(LOAD_PLUGINS_VARIABLE) == "":  # plugins switched off
        return False
    return bool(installed_plugins())


class MiddleGroup(click.Group):
    """Turns every MiddleError into `error: <message>` on stderr and exit code 1, no traceback.

    Built-in subcommands in other modules load on first use (LAZY_COMMANDS); plugins add
    commands through the `register_commands` hook, loaded when a command is not a built-in one
    (or `memory`, which plugins extend).
    """

    _plugins_loaded = False

    def _load_plugin_commands(self) -> None:
        if MiddleGroup._plugins_loaded:
            return
        MiddleGroup._plugins_loaded = True
        from orchestrator.plugins.manager import call_hook, registry

        self._lazy("memory")  # the group plugins add their `middle memory ...` commands to
        try:
            call_hook(registry().hook, "register_commands", cli=self)
        except MiddleError as exc:  # a broken plugin must not take the built-in commands down
            err_console.print(f"[yellow]warning:[/] plugin commands not loaded: {safe(exc)}")

    def _lazy(self, name: str) -> Any:
        if name not in self.commands and name in LAZY_COMMANDS:
            import importlib

            module, attr = LAZY_COMMANDS[name][0].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return self.commands.get(name)

    def get_command(self, ctx: click.Context, name: str) -> Any:
        command = self._lazy(name)
        if command is None or name == "memory":
            self._load_plugin_commands()
            command = super().get_command(ctx, name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        if _has_entry_point_plugins():  # an installed plugin may add top-level commands
            self._load_plugin_commands()
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """`middle --help`: short help from LAZY_COMMANDS, without importing those modules."""
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and name not in self.commands:
                rows.append((name, LAZY_COMMANDS[name][1]))
            else:
                rows.append((name, self.commands[name].get_short_help_str(formatter.width - 20)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """`middle --bogus` or `middle --config` (no value): the same one line as a subcommand's
        bad option, not click's usage block."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # plain `middle`: its help
        except click.UsageError as exc:
            if parent is not None:
                raise
            _usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MiddleError as exc:
            err_console.print(f"[bold red]error:[/] {safe(exc)}")
            sys.exit(1)
        except KeyboardInterrupt:  # Ctrl-C in a command that does not say more itself (click: "Aborted!")
            err_console.print("[yellow]interrupted:[/] stopped by Ctrl-C")
            sys.exit(EXIT_INTERRUPTED)
        except click.exceptions.NoArgsIsHelpError as exc:  # `middle memory` alone: its help, not an error
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:  # a bad option or argument: one line too, with where to look
            _usage_error(exc)


def _usage_error(exc: click.UsageError) -> NoReturn:
    where = f"`{exc.ctx.command_path} --help`" if exc.ctx else "`middle --help`"
    message = exc.format_message()
    if isinstance(exc, click.NoSuchOption) and exc.option_name == "--fake" and exc.ctx and exc.ctx.parent is None:
        message = "--fake goes after the command's name, as in `middle run --fake`"  # not `middle --fake run`
    err_console.print(f"[bold red]error:[/] {safe(message)} (see {where})")
    sys.exit(exc.exit_code)


@click.group(cls=MiddleGroup)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help=f"Config file (default: ./{CONFIG_FILE}, or MIDDLE_CONFIG).")
@click.option("-v", "--verbose", is_flag=True, help="Log memory calls and graph steps.")
@click.version_option(package_name="middle-agent")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, verbose: bool) -> None:
    """middle-agent: a middle agent that works through tickets by driving Claude Code."""
    if verbose or ctx.invoked_subcommand not in QUICK_COMMANDS:
        import logging

        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        if not verbose:  # each failed try of a connection pool: the store says it once, as `error:`
            logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    ctx.obj = {"config_path": config_path}
    from orchestrator.lifecycle.next_steps import started_as

    started_as(config=config_path, fake=False)  # advice repeats it: `middle --config X resume ID`
    ctx.call_on_close(lambda: started_as(config=None, fake=False))  # (one process, many commands: tests)


def open_orchestrator(ctx: click.Context, config: Config, fake: bool):
    from orchestrator.lifecycle.next_steps import started_as

    started_as(fake=fake)  # what this command suggests next keeps --fake
    if fake:  # said first: building the orchestrator imports LangGraph and the SDK (a second)
        console.print("[yellow]offline:[/] using the built-in fake model (no API key needed)")
    from orchestrator.running.orchestrator import Orchestrator

    orch = Orchestrator(config, services=services(ctx, config, fake=fake), say=say, on_event=on_event)
    ctx.call_on_close(orch.close)
    say_local_note(orch.services)
    return orch


def say_local_note(svc: Any) -> None:
    """A model at a local address is priced as unknown (pricing.py): how to count it at 0, said
    once as a command that starts turns opens (`run`, `resume`, `feedback`, `worker`)."""
    from orchestrator.doctor import local_note_once

    note = local_note_once(svc)
    if note:
        console.print(f"[yellow]note:[/] {safe(note)}")


def _interrupted(ticket_ids: list[str] | str) -> None:
    from orchestrator.lifecycle.next_steps import command

    for tid in [ticket_ids] if isinstance(ticket_ids, str) else ticket_ids:  # as the run was started
        err_console.print(f"[yellow]interrupted:[/] {safe(command('resume', tid).strip('`'))}")
    sys.exit(EXIT_INTERRUPTED)


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP end a run like Ctrl-C: turns and runs marked interrupted, Claude Code
    killed, exit 130 (a closed terminal or `kill` must not leave an orphan spending money)."""
    import signal

    from orchestrator.errors import RunInterrupted

    def stop(signum: int, _frame: Any) -> None:
        raise RunInterrupted(f"stopped by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@main.command()
@click.argument("ticket_ids", nargs=-1)
@click.option("--tickets", "tickets_dir", default=None, help="Ticket folder (default [project] tickets_dir).")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.option("--rerun", is_flag=True, help="Also start tickets that are already complete or merged.")
@click.option("--fresh", is_flag=True,
              help="Start over a ticket whose earlier run left work (its branch, edits, untracked files), dropping it.")
@click.option("--parallel", "-j", type=TicketsAtOnce(), default=None,
              help="Tickets at once, each in its own worktree (default [run] parallel).")
@click.pass_context
def run(ctx: click.Context, ticket_ids: tuple[str, ...], tickets_dir: str | None, fake: bool,
        rerun: bool, fresh: bool, parallel: int | None) -> None:
    """Run the given tickets, or every pending one, from the ticket folder. A ticket whose
    earlier run left work is refused (continue it with `middle resume` or `middle feedback`)
    unless --fresh."""
    config = get_config(ctx)
    orch = open_orchestrator(ctx, config, fake)
    from orchestrator.cli.batch_view import make_view
    from orchestrator.cli.ticket_report import say_changes, say_problems
    from orchestrator.running.batch import BatchInterrupted, run_batch

    loaded = orch.sync_tickets(tickets_dir)
    say_changes(loaded)
    say_problems(loaded, config.state_path)
    blocked: dict[str, str] = {}
    for problem in loaded.dependency_errors:
        err_console.print(f"[bold red]error:[/] {safe(problem)}")
        blocked.update({tid: str(problem) for tid in problem.ticket_ids})
    ticket_ids = tuple(_ticket_id(t, loaded) for t in ticket_ids)
    for tid in ticket_ids:
        if not orch.store.has_ticket(tid):
            raise TicketError(_no_such_ticket(tid, loaded, config))
    ids = list(ticket_ids) or [t.id for t in orch.store.list_tickets(status="pending")]
    if not ids:
        console.print("no pending tickets (see `middle tickets`)" + _unfinished(orch.store))
    n = parallel or config.run.parallel
    view = make_view(n)
    try:
        with _stop_signals():
            result = run_batch(orch, ids, parallel=n, rerun=rerun, named=bool(ticket_ids), view=view,
                               blocked=blocked, fresh=fresh)
    except BatchInterrupted as exc:
        view.close()
        if exc.outcomes:
            console.print(summary_line(exc.outcomes))
        _interrupted(exc.ticket_ids)
    finally:
        view.close()
    if result.outcomes:
        console.print(summary_line(result.outcomes))
    if result.stopped:
        err_console.print(f"[yellow]stopped:[/] {safe(result.stopped)}; the other tickets stay pending")
    if result.fatal is not None:
        raise result.fatal
    for error in result.errors:
        err_console.print(f"[bold red]error:[/] {safe(error)}")
    # Problems in ticket files fail a run of the whole backlog; a run of named tickets is judged
    # by those tickets (the other files were still reported above).
    named_blocked = any(tid in blocked for tid in ticket_ids)
    if (any(o.status == "failed" for o in result.outcomes) or result.errors or named_blocked
            or (not ticket_ids and (loaded.errors or blocked))):
        sys.exit(1)


def _unfinished(store: TicketStore) -> str:
    """What `middle run` with nothing pending adds: the tickets whose runs wait to be continued."""
    from orchestrator.lifecycle.next_steps import advise, situation

    waiting = [t.id for t in store.list_tickets() if t.status.value in ("interrupted", "running", "failed")]
    lines = [f"{tid}: {advise(store, tid)}" for tid in waiting
             if situation(store, tid) in ("interrupted", "stale", "failed-resumable", "failed-check",
                                          "failed-work", "failed-round")]
    return "; unfinished: " + "; ".join(lines) if lines else ""


def _ticket_id(arg: str, loaded: Any) -> str:
    """A ticket id, also when given as its file's path (`tickets/001-x.md`, as tab completion gives)."""
    if not (arg.endswith(".md") or "/" in arg):
        return arg
    path = str(Path(arg).resolve())
    return next((t.id for t in loaded.tickets if t.source == path), Path(arg).stem)


def _no_such_ticket(tid: str, loaded: Any, config: Config) -> str:
    """`middle run ID` of an unknown id: say whether a file by that name failed to load."""
    for problem in loaded.errors:
        if Path(problem.path).stem == tid or Path(problem.path).name == tid:
            return f"ticket {tid!r} was skipped: {problem.message}"
    where = getattr(loaded, "where", "") or config.resolve(config.project.tickets_dir)
    return f"no ticket {tid!r} in {where}: see `middle tickets`"


@main.command()
@click.option("--tickets", "tickets_dir", default=None, help="Ticket folder (default [project] tickets_dir).")
@click.option(
    "--from",
    "source",
    default=None,
    metavar="KIND:ARG",
    help="Ticket source instead of [tickets], e.g. markdown:other-folder or github:OWNER/REPO.",
)
@click.option("--label", "labels", multiple=True, metavar="L", help="github: only issues with this label (repeatable).")
@click.option("--milestone", default=None, metavar="M", help="github: only issues of this milestone (title or number).")
@click.option("--fake", is_flag=True, help="Run the review rounds pull requests ask for on the built-in fake model.")
@click.pass_context
def sync(
    ctx: click.Context,
    tickets_dir: str | None,
    source: str | None,
    labels: tuple[str, ...],
    milestone: str | None,
    fake: bool,
) -> None:
    """Load the tickets (the ticket folder, or [tickets] source) into the store, for workers to pick up."""
    from orchestrator.cli.ticket_report import say_changes, say_problems
    from orchestrator.running.sync import sync as sync_source

    if tickets_dir is not None and source is not None:
        raise click.UsageError("give --tickets DIR or --from KIND:ARG, not both (--tickets DIR is --from markdown:DIR)")
    config = get_config(ctx)
    svc = services(ctx, config)
    store = svc.store
    extra = {**({"labels": list(labels)} if labels else {}), **({"milestone": milestone} if milestone else {})}
    loaded = sync_source(
        store, config, source=source, folder=tickets_dir, registry=svc.registry, options=extra, pulls=True
    )
    say_changes(loaded)
    say_problems(loaded, config.state_path)
    print_each(err_console, "[bold red]error:[/]", loaded.dependency_errors)
    console.print(f"{len(loaded.tickets)} ticket(s) in {safe(store.where)}: {len(loaded.new or [])} new")
    from orchestrator.github.pull_updates import catch_up

    catch_up(store, config, say)  # a pull request a killed round's end left behind (before its signals are read)
    from orchestrator.lifecycle.run_lifecycle import catch_up_end_hooks

    catch_up_end_hooks(svc.lifecycle, say)  # the plugins' end hooks a kill skipped (tickets/end_hooks.py)
    failed = _pull_request_rounds(ctx, config, store, fake)
    if loaded.errors or loaded.dependency_errors or failed:
        sys.exit(1)


def _pull_request_rounds(ctx: click.Context, config: Config, store: TicketStore, fake: bool) -> bool:
    """The review rounds the tickets' pull requests ask for (failed CI, changes requested), run
    here; whether one of them failed."""
    from orchestrator.github.signals import act_on_signals, read_signals

    found = read_signals(store, config)
    if not found:
        return False
    orch = open_orchestrator(ctx, config, fake)
    try:
        with _stop_signals():
            outcomes = act_on_signals(orch, config, found, say)
    except KeyboardInterrupt:
        _interrupted([f.ticket_id for f in found])
    for outcome in outcomes:
        report(outcome)
    return any(o.status == "failed" for o in outcomes)


@main.command()
@click.argument("ticket_id")
@click.option("--fake", is_flag=True, help="Use the built-in offline fake model instead of the API.")
@click.pass_context
def resume(ctx: click.Context, ticket_id: str, fake: bool) -> None:
    """Continue a ticket's interrupted run, or a failed one that has work or can be retried, from
    its last checkpoint, with [check], [worktree] and the ticket's front matter as they are now."""
    orch = open_orchestrator(ctx, get_config(ctx), fake)
    try:
        with _stop_signals():
            outcome = orch.resume(ticket_id)
    except KeyboardInterrupt:
        _interrupted(ticket_id)
    report(outcome)
    if outcome.status != "complete":
        sys.exit(1)


@main.command()
@click.option("--status", default=None, help="Only tickets with this status.")
@click.pass_context
def tickets(ctx: click.Context, status: str | None) -> None:
    """List the tickets: the ticket folder's, with their status from past runs."""
    from orchestrator.cli.ticket_report import say_problems
    from orchestrator.lifecycle.next_steps import command
    from orchestrator.running.sync import load
    from tickets.claims import died_note
    from tickets.deps import check_dependencies, waiting_for
    from tickets.model import TicketStatus

    config = read_config(ctx)
    if status is not None and status not in {s.value for s in TicketStatus}:
        raise click.BadParameter(f"use one of {', '.join(s.value for s in TicketStatus)}", param_hint="--status")
    store = read_store(ctx, config)  # read-only: creates no file
    known = {t.id: t for t in store.list_tickets()} if store else {}
    folder = load(config, store=store)
    # As the next sync will store them (nothing is written here): those the source no longer has
    # discarded, with why; those it has again pending.
    known.update(
        {
            tid: known[tid].replace(status=TicketStatus.DISCARDED, status_reason=why)
            for tid, why in folder.closed.items()
        }
    )
    known.update({tid: known[tid].replace(status=TicketStatus.PENDING, status_reason=None) for tid in folder.back})
    rows = dict(known)
    for t in folder.tickets:  # the file's content (its depends_on) with the stored status
        rows[t.id] = (
            t.replace(status=known[t.id].status, status_reason=known[t.id].status_reason) if t.id in known else t
        )
    problems = check_dependencies(folder.tickets, rows)
    blocked = {tid: "bad depends_on: see the error below" for p in problems for tid in p.ticket_ids}

    def status_of(tid: str) -> str | None:
        return rows[tid].status.value if tid in rows else None

    # Where each ticket came from, once some come from elsewhere than a Markdown file (an issue).
    origins = {t.id: _origin(t.source) for t in rows.values()}
    show_from = any(origins.values())
    checked = store.check_outcomes() if store is not None else {}  # the latest run's check, once any ran
    table = make_table(
        "id",
        "project",
        "status",
        "waits for",
        "title",
        *(("from",) if show_from else ()),
        *(("check",) if checked else ()),
        "note",
    )
    for t in sorted(rows.values(), key=lambda t: t.id):
        st = t.status.value
        if st == "running" and store is not None and (died := died_note(store.get_claim(t.id))):
            run = store.latest_run(t.id)
            then = command("resume", t.id, fake=bool(run and run.get("offline")))  # the table's advice, short
            st, t = "interrupted", t.replace(status_reason=f"{died}: {then}")  # shown so; nothing is written
        if status and st != status:
            continue
        # What may still start waits (a discarded ticket waits for nothing: it is not wanted).
        waits = blocked.get(t.id) or (
            ", ".join(waiting_for(t, status_of, config.dependencies)) if st in ("pending", "failed", "reverted") else ""
        )
        table.add_row(
            safe(t.id),
            safe(t.project_id),
            st,
            safe(shorten(waits or "-", 40)),
            safe(shorten(t.title, 60)),
            *((safe(origins[t.id] or "file"),) if show_from else ()),
            *((_check_cell(checked.get(t.id)),) if checked else ()),
            safe(shorten(t.status_reason or "", 60)),
        )
    console.print(table)
    say_problems(folder)  # every one in full: this is where they are listed
    for problem in problems:
        err_console.print(f"[bold red]error:[/] {safe(problem)}")
    if problems:  # the list is still shown, the broken tickets marked; an error line fails the command
        sys.exit(1)


def _check_cell(outcome: tuple[str, int, str | None] | None) -> str:
    """The latest run's check in `middle tickets`: its outcome (which failures a "no worse" check
    had on the base already), and its corrections when any."""
    from orchestrator.checks.verdict import check_label

    if outcome is None:
        return "-"
    status, corrections, note = outcome
    return safe(shorten(check_label(status, note), 70)) + (
        f" ({corrections} correction{'' if corrections == 1 else 's'})" if corrections else "")


def _origin(source: str | None) -> str:
    """A ticket's source as the table shows it: `me/app#12` for a GitHub issue; "" for a file."""
    if not source or not source.startswith(("http://", "https://", "github:")):
        return ""
    from tickets.github.source import short_origin

    return short_origin(source)


@main.command()
@click.argument("ticket_id")
@click.option("--full", is_flag=True, help="Do not shorten prompts and responses.")
@click.option("--follow", "-f", is_flag=True, help="Stream the latest run's events live until it ends.")
@click.pass_context
def log(ctx: click.Context, ticket_id: str, full: bool, follow: bool) -> None:
    """Show every run and turn of a ticket: prompt, response, memories invoked, decision, cost."""
    from orchestrator.cli.log_view import follow_log, print_log
    from orchestrator.errors import TicketError

    store = read_store(ctx, read_config(ctx))
    if store is None:
        from orchestrator.lifecycle.next_steps import command

        raise TicketError(f"no ticket {ticket_id!r} has run yet: start it with {command('run', ticket_id)}")
    if follow:
        follow_log(console, store, ticket_id)
        return
    print_log(console, store, ticket_id, full=full)


@main.command()
@click.option(
    "--backend",
    default=None,
    help=f"Memory backend for the new config (default: {DEFAULT_BACKEND}; see `middle backends`).",
)
@click.pass_context
def init(ctx: click.Context, backend: str | None) -> None:
    """Write a starter middle.toml and a tickets/ folder with one example ticket."""
    from orchestrator.cli.scaffold import git_note, write_starter
    from orchestrator.config.settings import find_config_file
    from orchestrator.errors import ConfigError
    from orchestrator.plugins.manager import registry

    if backend is not None:
        registry().backend_class(backend)  # an unknown name is an error before any file
    explicit = ctx.find_root().obj["config_path"]
    path = Path(explicit or CONFIG_FILE)
    enclosing = find_config_file(Path.cwd()) if not explicit else None
    if enclosing is not None and enclosing.is_file() and not path.exists():
        raise ConfigError(
            f"{enclosing} already makes this folder part of a project: run `middle` "
            "commands from anywhere inside it; to start a separate project here "
            "anyway, pass --config middle.toml"
        )
    from orchestrator.workspace.git import inside_git_dir, no_work_tree_message

    folder = path.resolve().parent
    try:
        bare = folder.is_dir() and inside_git_dir(folder)  # files written there are never committed
    except MiddleError:  # no git installed: init still writes its files (and says git is needed)
        bare = False
    if bare:
        raise ConfigError(no_work_tree_message(folder))
    result = write_starter(path, backend)
    for line in result:
        console.print(safe(line))
    note = git_note(path.resolve().parent)
    if note:
        console.print(f"[yellow]note:[/] {safe(note)}")
    console.print(safe(  # safe: "[agent]" is text here, not console markup
        "next: edit tickets/*.md, export ANTHROPIC_API_KEY (or set [agent] provider: a Claude "
        "subscription, Bedrock, Vertex, a local model), check with `middle doctor`, then `middle run` "
        "(or `middle run --fake` to try it offline)"
    ))


@main.command()
def graph() -> None:
    """Print the ticket workflow as a Mermaid diagram."""
    from orchestrator.graph import mermaid

    click.echo(mermaid())


@main.command()
@click.argument("name", required=False)
def backends(name: str | None) -> None:
    """List the memory backends (the default marked), or show one backend's options."""
    from orchestrator.plugins.manager import registry

    reg = registry()
    if name is not None:
        _backend_detail(reg, name)
        return
    table = make_table("backend", "recall", "plugin", "options", "description")
    for backend, r in sorted(reg.backends.items()):
        label = f"{backend} (default)" if backend == DEFAULT_BACKEND else backend
        table.add_row(
            label, _recall_kind(backend, r.cls), r.plugin, str(len(r.cls.Options.model_fields)), r.cls.description
        )
    console.print(table)
    console.print("`middle backends NAME` shows a backend's options, their defaults and what they do")


def _recall_kind(name: str, cls: type[MemoryBackend]) -> str:
    if name == "none":
        return "- (memory off)"
    return "by recency (query ignored)" if cls.recall == "recency" else "by relevance"


def _backend_detail(reg: Any, name: str) -> None:
    """`middle backends NAME`: what it is, and each [memory.options] key with default and doc."""
    cls = reg.backend_class(name)
    entry = reg.backends[name]
    console.print(f"[bold]{safe(name)}[/]{' (default)' if name == DEFAULT_BACKEND else ''}: {safe(cls.description)}")
    console.print(f"recall: {_recall_kind(name, cls)}; registered by {safe(entry.plugin)}")
    fields = cls.Options.model_fields
    if not fields:
        console.print("options: none")
        return
    table = make_table("option", "default", "what it does")
    for key, field in fields.items():
        default = field.get_default(call_default_factory=True)
        table.add_row(key, safe(repr(default)), safe(field.description or "-"))
    console.print(table)
    console.print(
        f"set them under {safe('[memory.options]')} in middle.toml, e.g. {next(iter(fields))} = "
        f"{_toml(fields[next(iter(fields))].get_default(call_default_factory=True))}"
    )


def _toml(value: Any) -> str:
    import json

    if value is None:
        return '"..."  # unset by default'
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value)


@main.command()
def plugins() -> None:
    """List the loaded plugins, where each comes from, and the hooks it implements."""
    from orchestrator.plugins.manager import registry

    table = make_table("plugin", "source", "hooks", "file")
    for row in registry().plugin_rows():
        table.add_row(row["name"], row["source"], row["hooks"], row["file"])
    console.print(table)


def entry() -> None:
    """The `middle` script: run the command, then leave at once.

    Once a command has finished and closed what it opened, the interpreter's own teardown
    (collecting a large heap of modules and objects) still took over half a second after the last
    line was printed. With no thread left that could still be working, the exit handlers run
    and the process ends without that teardown.
    """
    import atexit
    import os
    import threading

    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            err_console.print(str(exc.code))
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if others:  # something may still be writing: leave the normal way, which waits for it
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`middle log | head`)
            pass
    os._exit(code)


if __name__ == "__main__":  # `python -m orchestrator.cli.main`, as the `middle` script does
    entry()
