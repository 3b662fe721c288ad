"""`middle demo`: the sample repo's backlog, end to end, offline, on the built-in fake model."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import click
from rich.markup import escape

from orchestrator.cli.examples import examples_dir  # noqa: F401 - re-exported (examples/api_example.py)
from orchestrator.config.settings import DEFAULT_BACKEND, load_config
from orchestrator.errors import ConfigError


def prepare(workdir: Path, examples: Path, backend: str, agent: str = "claude-code") -> Path:
    """Copy the sample repo and backlog into workdir and write its middle.toml (on coding agent `agent`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    if (workdir / "middle.toml").exists() or (workdir / "repo").exists():
        raise ConfigError(f"{workdir} already holds a demo: pass an empty or new --dir")
    shutil.copytree(examples / "sample-repo", workdir / "repo")
    shutil.copytree(examples / "backlog", workdir / "tickets")
    text = (examples / "configs" / f"{backend}.toml").read_text(encoding="utf-8")
    if agent != "claude-code":  # Claude Code's options stay, as the table of a kind not configured
        text = text.replace('kind = "claude-code"', f'kind = "{agent}"').replace(
            "[coding_agent.options]", "[coding_agents.claude-code]")
    (workdir / "middle.toml").write_text(text, encoding="utf-8")
    _git_init(workdir / "repo")
    return workdir / "middle.toml"


def check_agent(kind: str) -> None:
    """The demo runs `kind` offline: it must be registered, have `offline`, and have its CLI here."""
    from orchestrator.cli.agents import cli_status
    from orchestrator.plugins.manager import registry

    cls = registry().coding_agent_class(kind)  # unknown: an error listing the kinds
    if not callable(getattr(cls, "offline", None)):
        raise ConfigError(f"coding agent {kind!r} cannot run the offline demo: it has no `offline` to point it "
                          "at a fake model API (`middle agents` says which can)")
    # (the demo writes its own middle.toml: a cli_path there is `[coding_agents.<kind>]`'s)
    found, where = cli_status(cls, f"[coding_agents.{kind}]")
    if found is False:
        raise ConfigError(f"the CLI of coding agent {kind!r} is {where}")


def _git_init(repo: Path) -> None:
    """Make the sample repo a git repository with one commit: each ticket runs on its own branch."""
    from orchestrator.workspace.git import author_args, git

    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, *author_args(repo), "commit", "--quiet", "--no-verify", "-m", "Sample repo")


@click.command()
@click.pass_context
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None,
              help="Where to put the demo project, kept afterwards to explore (default: a "
                   "temporary folder, removed at the end).")
@click.option("--examples", type=click.Path(file_okay=False, exists=True), default=None,
              help="The examples folder (default: the one in this clone).")
@click.option("--memory/--no-memory", default=True, show_default=True,
              help=f"Run with project memory (the default backend, {DEFAULT_BACKEND}), or with memory off.")
@click.option("--agent", "agent", default="claude-code", show_default=True,
              help="The coding agent to run it on (`middle agents` lists them): its real CLI on a fake of its API.")
def demo(ctx: click.Context, workdir: str | None, examples: str | None, memory: bool, agent: str) -> None:
    """Run the sample backlog with a real coding agent CLI (Claude Code, or --agent) on the offline fake model."""
    from orchestrator.cli.log_view import print_log
    from orchestrator.cli.main import open_orchestrator
    from orchestrator.cli.output import console, report

    check_agent(agent)  # before anything is made
    keep = workdir is not None
    root = Path(workdir).resolve() if workdir is not None else Path(tempfile.mkdtemp(prefix="middle-demo-"))
    if not keep:  # removed when the command ends, however it ends (the services close first)
        ctx.call_on_close(lambda: shutil.rmtree(root, ignore_errors=True))
    backend = DEFAULT_BACKEND if memory else "none"
    config_file = prepare(root, Path(examples) if examples else examples_dir(), backend, agent)
    config = load_config(config_file, environ={})  # the demo ignores MIDDLE_* overrides
    console.print(f"[bold]middle demo[/] in {root} (memory {'on: ' + backend if memory else 'off'}; "
                  f"coding agent {escape(agent)})")
    failed = 0
    orch = open_orchestrator(ctx, config, fake=True)  # closed when the command ends
    orch.sync_tickets()
    tickets = orch.store.list_tickets(status="pending")
    for ticket in tickets:
        console.print(f"\n[bold]ticket {escape(ticket.id)}[/]: {escape(ticket.title)}")
        outcome = orch.run_ticket(ticket.id)
        report(outcome)
        failed += outcome.status != "complete"
        if outcome.status == "complete":  # what a reviewer does next: `middle merge ID`
            merged = orch.services.review.merge(ticket.id)
            console.print(f"  [dim]·[/] middle merge {escape(ticket.id)}: {escape(merged.message)}")
    if len(tickets) > 1:  # the second ticket is the first that recalls memory
        console.print("\n[bold]the execution log of the second ticket (`middle log`):[/]")
        print_log(console, orch.store, tickets[1].id)
    created = sorted(p.relative_to(root) for p in (root / "repo").rglob("*.py"))
    console.print("\n[bold]files in the sample repo now:[/] " + ", ".join(map(str, created)))
    if orch.memory is not None:
        docs = orch.memory.list_docs("calc")
        console.print(f"[bold]project memory[/] ({len(docs)} doc(s) in {orch.memory.store_dir('calc')})")
    if keep:
        console.print(f"\nexplore it: cd {root} && middle tickets && middle log 002-farewell")
    else:
        console.print("\n(the demo folder is removed now: `middle demo --dir DIR` keeps it to explore)")
    if failed:
        sys.exit(1)
