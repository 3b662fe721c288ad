"""Every stop the check gate can end a ticket in, and every way out: through the `middle` CLI
(in-process, its own code from the command line down: config, store, graph, git), the middle agent
and Claude Code the scripted fakes of orchestrator.testing (as the gate's graph tests use), for
each (stop, way out) the branch still holds the work, the way out does what the stop's message
says, or is refused with one `error:` line where the message does not offer it, and no turn runs
or is paid for twice.

The stops (docs/checks.md, "What happens"): the check still failing after its rounds, a check
that cannot be judged (undecided), a check that cannot run on the base, a correction past the turn
limit or the cost limit, and a worktree setup that failed. The ways out: `middle resume` (after
fixing the config), `middle feedback`, `middle merge --despite-check`, `middle discard`, `middle diff`, `middle log`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, decision_reply, plan_reply
from orchestrator.workspace.git import git

# a.py, once there, must say `x = 2`: the base passes, the ticket's first turn (x = 1) fails it
CHECK = (f"{sys.executable} -c \"import pathlib, sys; a = pathlib.Path('a.py'); "
         f"sys.exit(0 if not a.exists() or 'x = 2' in a.read_text() else 1)\"")
# fails on the base and on the ticket with the same words: it names nothing, so undecided
SAME = f"{sys.executable} -c \"print('checks failed'); raise SystemExit(1)\""
STOPS = {  # stop: (its config, what the stop's message offers)
    "rounds": ({"check": {"commands": [CHECK], "max_rounds": 0}}, {"resume", "feedback", "override"}),
    "undecided": ({"check": {"commands": [SAME]}}, {"diff", "override", "feedback", "resume"}),
    "cannot run": ({"check": {"commands": ["no-such-checker --all"]}}, {"run"}),
    "turn limit": ({"check": {"commands": [CHECK], "max_rounds": 3}, "agent": {"max_turns": 1}},
                   {"feedback", "resume", "discard"}),
    "cost limit": ({"check": {"commands": [CHECK], "max_rounds": 3}, "agent": {"max_cost_usd": 0.01}},
                   {"feedback", "resume", "discard"}),
    "setup failed": ({"check": {"commands": [CHECK]}, "worktree": {"setup": ["exit 3"]}}, {"resume"}),
}
SAID = {"rounds": "still failing after 0 round(s)", "undecided": "cannot be judged",
        "cannot run": "cannot run on the base commit", "turn limit": "turn limit reached",
        "cost limit": "cost limit reached", "setup failed": "worktree setup `exit 3` failed"}
WAYS = ("resume", "feedback", "override", "discard", "diff", "log")


class AgentLLM:
    """The middle agent: plans one prompt, then says complete (what it was told, kept)."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def complete(self, system: str, messages: list[dict[str, str]], schema: Any) -> str:
        self.read += [str(m.get("content", "")) for m in messages]
        return plan_reply("write it") if schema.__name__ == "Plan" else decision_reply(True, "done")


def _write(text: str):
    def write(prompt: str, cwd: Path) -> str:
        (cwd / "a.py").write_text(text)
        return "wrote a.py"
    return write


def _toml(config: dict[str, Any]) -> str:
    lines = ['state_dir = "state"', "[project]", 'path = "repo"', "[memory]", 'backend = "none"']
    for table in ("agent", "check", "worktree"):
        values = {"max_turns": 4, "max_cost_usd": 5.0} if table == "agent" else {}
        values |= config.get(table, {})
        if values:
            lines += [f"[{table}]", *(f"{k} = {json.dumps(v)}" for k, v in values.items())]
    return "\n".join(lines) + "\n"


class Project:
    """A project folder with ticket t, run through the CLI; the fakes shared by every command."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]):
        from orchestrator.cli import context

        self.root = root
        self.repo = make_repo(root / "repo", {"README.md": "sample\n"})
        (root / "tickets").mkdir()
        (root / "tickets" / "t.md").write_text("---\ntitle: Write a\nproject: demo\nid: t\n---\nWrite a.py.\n")
        (root / "middle.toml").write_text(_toml(config))
        # the ticket's first turn writes x = 1; a later one (a correction, a round) x = 2
        self.agent = RecordingCodingAgent([_write("x = 1\n"), _write("x = 2\n")])
        self.llm = AgentLLM()
        build = context.services
        monkeypatch.setattr(context, "services", lambda ctx, cfg, **kw: build(
            ctx, cfg, **{**kw, "llm": self.llm, "coding_agent": self.agent}))
        monkeypatch.chdir(root)

    def middle(self, *args: str) -> Any:
        result = CliRunner().invoke(main, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        return result

    def branch_has_work(self) -> bool:
        return git(self.repo, "cat-file", "-e", "middle/t:a.py", check=False).returncode == 0

    def show(self, what: str) -> str | None:
        shown = git(self.repo, "show", what, check=False)
        return shown.stdout if shown.returncode == 0 else None

    def configure(self, config: dict[str, Any]) -> None:
        (self.root / "middle.toml").write_text(_toml(config))

    def _store(self) -> Any:
        from tickets.store import TicketStore

        return TicketStore(self.root / "state" / "middle.sqlite3")

    def status(self) -> str:
        store = self._store()
        try:
            return store.get_ticket("t").status.value
        finally:
            store.close()

    def runs_cost(self) -> float:
        store = self._store()
        try:
            return sum(r["total_cost_usd"] or 0 for r in store.list_runs("t"))
        finally:
            store.close()

    def turns(self) -> list[Any]:
        store = self._store()
        try:
            return [t for t in store.list_turns(ticket_id="t") if t["status"] == "done"]
        finally:
            store.close()


def _fixed(stop: str) -> dict[str, Any]:
    """The stop's config as a person fixes it before `middle resume` (or `middle run`)."""
    config = json.loads(json.dumps(STOPS[stop][0]))
    config["check"]["commands"] = [CHECK]  # a check that can run and judge: a.py must say x = 2
    config["check"]["max_rounds"] = 1  # one correction, which writes x = 2
    config.pop("agent", None)  # the turn limit raised back
    config.pop("worktree", None)  # the setup that failed left out
    return config


ARGS = {"resume": ["resume", "t", "--fake"], "feedback": ["feedback", "t", "make x 2", "--fake"],
        "override": ["merge", "t", "--despite-check", "the check is wrong here"], "discard": ["discard", "t"],
        "diff": ["diff", "t"], "log": ["log", "t"]}
ACTS = ("resume", "feedback", "override")  # the ways out that act on the work: offered, or refused


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("stop", STOPS)
def test_every_way_out_of_every_stop_does_what_the_stop_said_and_keeps_the_work(tmp_path, monkeypatch, stop, way):
    config, offers = STOPS[stop]
    p = Project(tmp_path, monkeypatch, config)
    stopped = p.middle("run", "t", "--fake")
    assert stopped.exit_code == 1, stopped.output
    worked = stop not in ("cannot run", "setup failed")  # a turn ran before the stop
    assert p.branch_has_work() == worked and p.status() == ("pending" if stop == "cannot run" else "failed")
    if worked:
        assert p.show("middle/t:a.py") == "x = 1\n"
    # the message names each way out it offers (and the ones this test calls refused, it does not)
    said = " ".join(stopped.output.split())
    assert SAID[stop] in said, said
    for act, words in (("resume", "`middle resume t --fake`"), ("feedback", "`middle feedback t "),
                       ("override", "--despite-check"), ("run", "`middle run t --fake`")):
        assert (words in said) == (act in offers), (act, said)
    before = (p.status(), p.show("middle/t:a.py"), len(p.agent.calls))

    if way == "resume" and "resume" in offers:
        p.configure(_fixed(stop))
    result = p.middle(*ARGS[way])
    out = " ".join(result.output.split())
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]

    if way in ACTS and way not in offers and not (stop == "setup failed" and way == "feedback"):
        # not offered: refused in one `error:` line saying what to do, nothing changed
        assert result.exit_code == 1 and len(errors) == 1 and "failed ticket t:" not in out, result.output
        assert (p.status(), p.show("middle/t:a.py"), len(p.agent.calls)) == before
        if stop == "cannot run":  # the way out it offers: `middle run` once the check is fixed
            assert "`middle run t" in errors[0], errors
            p.configure(_fixed(stop))
            again = p.middle("run", "t", "--fake")
            assert again.exit_code == 0 and p.status() == "complete", again.output
            assert p.show("middle/t:a.py") == "x = 2\n" and len(p.agent.calls) == 2
    elif way == "resume":  # after the config is fixed: from where it stopped, to complete
        assert result.exit_code == 0 and p.status() == "complete", result.output
        assert p.show("middle/t:a.py") == "x = 2\n"
        # turns that ran are not run again: the stop's turn, then the correction
        assert len(p.agent.calls) == 2 and len(p.turns()) == 2, (p.agent.prompts, p.turns())
    elif way == "feedback" and stop == "setup failed":
        # no work yet: the words are kept for the run's next assessment, and resume is said again
        assert result.exit_code == 0 and "feedback stored" in out and "`middle resume t --fake`" in out, out
        assert (p.status(), len(p.agent.calls)) == ("failed", 0)
    elif way == "feedback":  # a review round from the work, with the person's words
        assert len(p.agent.calls) == 2 and any("make x 2" in m for m in p.llm.read), out
        assert p.show("middle/t:a.py") == "x = 2\n" and len(p.turns()) == 2
        # the undecided check fails alike on any work: the round stops the same way, its work kept
        assert p.status() == ("failed" if stop == "undecided" else "complete"), out
    elif way == "override":  # merged as committed, the person's reason recorded
        assert result.exit_code == 0 and "despite its failing check" in out and "the check is wrong here" in out
        assert p.show("main:a.py") == "x = 1\n" and p.status() == "merged" and len(p.agent.calls) == 1
    elif way == "discard":  # what it says: the worktree and branch gone, nothing ran
        assert result.exit_code == 0 and "discarded ticket t" in out and p.status() == "discarded", out
        assert not p.branch_has_work() and len(p.agent.calls) == before[2]
    elif way == "diff":
        assert result.exit_code == 0, out
        assert ("+x = 1" in result.output) if worked else ("changed no files" in out), result.output
        assert (p.status(), p.show("middle/t:a.py")) == before[:2]
    else:  # log: the stop, as the run ended
        assert result.exit_code == 0 and ("cannot run" in out or "failed" in out), out
        assert (p.status(), p.show("middle/t:a.py")) == before[:2]
    # every turn counted once: the turns recorded are the ones the coding agent ran, each paid once
    # (the recording agent charges $0.01 a turn), in the turns and in the runs' totals
    turns = p.turns()
    assert len(turns) == len(p.agent.calls), (turns, p.agent.prompts)
    assert sum(t["cost_usd"] or 0 for t in turns) == pytest.approx(0.01 * len(turns))
    assert p.runs_cost() == pytest.approx(0.01 * len(turns))
