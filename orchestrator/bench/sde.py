"""`middle bench sde DIR`: sde-bench's bug-fix tasks end to end, memory on against memory off.

Per task and arm, in a temporary folder removed afterwards: the task's repository is built by
the task's own `build.py` from a local boltons clone, its failing repro committed; a project
like `middle init`'s is set up beside it (memory on: the configured backend, into which the
decision chats, sde-bench's decoy chats and the repository's git history are imported with
`middle memory import`; memory off: backend `none`); the bug report becomes the ticket, whose
check is the task's visible tests and must pass outright (`check_must_pass`); `middle run` runs
it; then the ticket's commit is graded as sde-bench grades: pristine copies of the visible tests
and the hidden test, which never reached the agent or its memory. Corrections, turns and cost
come from the ticket store. Every step is the real `middle` command in a child process.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from orchestrator.checks.runner import run_check
from orchestrator.config.paths import is_setting
from orchestrator.errors import ConfigError, GitError
from orchestrator.gitrun import git, out

from .runner import BackendSpec, Progress, no_progress
from .sde_tasks import Chat, SdeTask, chat_text, load_decoys, select_tasks

ARMS = ("memory on", "memory off")
MAX_ROUNDS = 5  # sde-bench's cap on corrections
TEST_TIMEOUT_S = 600.0  # per test command, in the check loop and when grading
SEED = 7  # the order the chats are imported in (the decision chats keep their own order)
HOUR_S = 3600.0
GET_BOLTONS = "git clone https://github.com/mahmoud/boltons"
# The settings a user's environment keeps for the runs: the model and the coding agent. The rest
# (memory, project, check, store) is the benchmark's, written into each run's middle.toml.
KEPT_SETTINGS = ("MIDDLE_AGENT_", "MIDDLE_CODING_AGENT_")
# Claude Code may run the tests and read the history, as a developer fixing the bug would.
ALLOWED_TOOLS = ["Read", "Write", "Edit", "Glob", "Grep", "Bash(python -m pytest *)", "Bash(pytest *)",
                 "Bash(git log *)", "Bash(git show *)", "Bash(git blame *)", "Bash(git diff *)"]


def child_env(environ: dict[str, str], fake: bool) -> dict[str, str]:
    """The environment of the `middle` processes: the user's, without the settings the benchmark
    sets itself (and without the API's variables for the offline fake)."""
    dropped = ("MIDDLE_CONFIG", "MIDDLE_STATE_DIR", "MEMORY_SAVE_DIR")
    env = {k: v for k, v in environ.items()
           if k.upper() not in dropped and not (is_setting(k) and not k.upper().startswith(KEPT_SETTINGS))}
    if fake:
        env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    return env


def _tail(proc: subprocess.CompletedProcess[str], lines: int = 3) -> str:
    text = ((proc.stderr or "") + "\n" + (proc.stdout or "")).strip().splitlines()
    return " / ".join(line.strip() for line in text[-lines:] if line.strip()) or f"exit {proc.returncode}"


def _middle(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli.main", *args], cwd=root, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)


def _must(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        raise ConfigError(f"{what} failed: {_tail(proc)}")


# -- the task's repository ------------------------------------------------------------------------

def build_repo(task: SdeTask, repo: Path, boltons: Path, home: Path, env: dict[str, str]) -> str:
    """The task's repository at `repo`, made by its build.py, with the failing repro committed;
    returns that commit (the ticket's base)."""
    # build.py finds boltons at $SDEBENCH_BOLTONS_HOST, or (older checkouts) at
    # ~/dev/_sdebench_hosts/boltons: both point at the clone given, HOME only for this process.
    hosts = home / "dev" / "_sdebench_hosts"
    hosts.mkdir(parents=True)
    (hosts / "boltons").symlink_to(boltons.resolve(), target_is_directory=True)
    build_env = {**env, "SDEBENCH_BOLTONS_HOST": str(boltons.resolve()), "HOME": str(home),
                 "PYTHONDONTWRITEBYTECODE": "1"}  # nothing is written into the checkout
    user_config = Path.home() / ".gitconfig"
    if user_config.is_file() and "GIT_CONFIG_GLOBAL" not in env:  # git still reads the user's own
        build_env["GIT_CONFIG_GLOBAL"] = str(user_config)
    proc = subprocess.run([sys.executable, str(task.build_script), str(repo)], cwd=task.folder.parent,
                          env=build_env, capture_output=True, text=True)
    if proc.returncode != 0 or not (repo / ".git").exists():
        raise ConfigError(f"building {task.name} failed (`python {task.build_script} DIR`: {_tail(proc)}): "
                          f"is {boltons} a clone of boltons with its full history ({GET_BOLTONS})?")
    target = repo / task.fail_to_pass[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(task.regression_test.read_text(encoding="utf-8"), encoding="utf-8")
    who = ["-c", "user.name=sde-bench", "-c", "user.email=sde-bench@localhost"]
    git(repo, "add", "--", task.fail_to_pass[0])
    git(repo, *who, "commit", "--quiet", "-m", f"test: the failing repro of the bug ({task.fail_to_pass[0]})")
    return out(repo, "rev-parse", "HEAD")


def pytest_command(paths: Sequence[str]) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     *(shlex.quote(p) for p in paths)])


# -- the project around it ------------------------------------------------------------------------

def _toml(value: Any) -> str:
    return json.dumps(value)  # strings, numbers, booleans and lists of them read the same in TOML


def write_project(root: Path, task: SdeTask, spec: BackendSpec | None, max_rounds: int) -> None:
    """middle.toml (memory: the backend, or `none` for memory off) and the bug report as the
    ticket, whose check is the task's visible tests, to pass outright."""
    options = "".join(f"{key} = {_toml(value)}\n" for key, value in (spec.options if spec else {}).items())
    (root / "middle.toml").write_text(
        "# Written by `middle bench sde` for one task and arm.\n"
        f"[project]\nid = {_toml(task.name)}\npath = \"repo\"\ntickets_dir = \"tickets\"\nbase_branch = \"main\"\n\n"
        f"[memory]\nsave_dir = \".middle/memory\"\nbackend = {_toml(spec.name if spec else 'none')}\n\n"
        f"[memory.options]\n{options}\n"
        f"[check]\nmax_rounds = {max_rounds}\ntimeout_s = {TEST_TIMEOUT_S}\n\n"
        f"[coding_agent.options]\npermission_mode = \"acceptEdits\"\nallowed_tools = {_toml(ALLOWED_TOOLS)}\n",
        encoding="utf-8")
    first = task.bug_report.splitlines()[0].split(". ")[0].strip().rstrip(".")
    title = first if len(first) <= 100 else first[:97].rstrip() + "..."
    check = pytest_command(task.fail_to_pass + task.pass_to_pass)
    (root / "tickets").mkdir()
    (root / "tickets" / f"{task.name}.md").write_text(
        f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\nproject: {task.name}\n"
        f"check: [{json.dumps(check)}]\ncheck_must_pass: true\n---\n{task.bug_report}\n", encoding="utf-8")


def chat_files(folder: Path, task: SdeTask, decoys: list[Chat], now: float, seed: int = SEED) -> Path | None:
    """The decoy chats and the task's decision chats as Markdown files, one a chat, in a seeded
    shuffled order an hour apart (a file's time is its doc's time), the decision chats in their
    own order (an amendment after the rule it amends), the newest a day before `now`. Returns
    the file of the chat that decides (the last decision chat), None for a task without chats."""
    chats: list[tuple[Chat, bool]] = [(c, False) for c in decoys] + [(c, True) for c in task.chats]
    random.Random(seed).shuffle(chats)
    places = [p for p, (_, decides) in enumerate(chats) if decides]
    for place, chat in zip(places, task.chats):  # the task's chats back in their own order
        chats[place] = (chat, True)
    folder.mkdir()
    start = now - 24 * HOUR_S - len(chats) * HOUR_S
    deciding = None
    for n, (chat, decides) in enumerate(chats):
        path = folder / f"chat-{n + 1:03d}.md"
        path.write_text(chat_text(chat) + "\n", encoding="utf-8")
        os.utime(path, (start + n * HOUR_S, start + n * HOUR_S))
        if decides:
            deciding = path  # the last of them: the one whose rule holds
    return deciding


def import_memory(root: Path, task: SdeTask, decoys: list[Chat], env: dict[str, str]) -> Path | None:
    """The chats and the repository's history into the project's fresh memory; the deciding
    chat's file (None when the task has no chat)."""
    if not (task.chats or decoys):
        deciding = None
    else:
        deciding = chat_files(root / "chats", task, decoys, time.time())
        _must(_middle(root, env, "memory", "import", "--no-progress", "chats"),
              f"`middle memory import chats` for {task.name}")
    _must(_middle(root, env, "memory", "import", "--no-progress", "git"), f"`middle memory import git` for {task.name}")
    return deciding


# -- after the run ------------------------------------------------------------------------------

def read_run(root: Path, task: SdeTask) -> dict[str, Any] | None:
    """The ticket's run from the store: outcome, corrections, turns, cost, the memories shown."""
    from tickets.store import TicketStore

    db = root / ".middle" / "middle.sqlite3"
    if not db.is_file():
        return None
    with TicketStore(db, readonly=True) as store:
        run = store.latest_run(task.name)
        if run is None:
            return None
        shown = {str(m.get("id")) for e in store.list_events(run_id=run["id"], limit=100_000)
                 if e["kind"] == "recall" for m in e["data"].get("memories") or []}
        return {"run": run, "turns": len(store.list_turns(run_id=run["id"])), "shown": shown}


def decision_ids(root: Path, task: SdeTask, deciding: Path | None, env: dict[str, str]) -> set[str] | None:
    """The short ids of the memory docs that hold the decision (the deciding chat, or a history
    task's decision commit when task.json names its subject); None when neither is known."""
    from orchestrator.memory.format import DOC_ID_CHARS, doc_id

    if deciding is None and task.decision_subject is None:
        return None
    export = root / "memory.json"
    _must(_middle(root, env, "memory", "export", "-o", str(export)), f"`middle memory export` for {task.name}")
    docs = json.loads(export.read_text(encoding="utf-8"))["docs"]

    def holds_it(doc: str) -> bool:
        if deciding is not None:  # an imported file's doc starts with its name (and headings)
            return doc.split("\n", 1)[0].split(" > ")[0] == deciding.name
        return str(task.decision_subject) in doc

    return {doc_id(d)[:DOC_ID_CHARS] for d in docs if holds_it(d)}


def grade(task: SdeTask, repo: Path, commit: str, base: str, where: Path) -> dict[str, Any]:
    """sde-bench's grade of `commit`: in a checkout of it, pristine copies of the visible tests
    (the repro from the task, the others from the base commit) and the hidden test; the visible
    tests and the hidden test each pass or not."""
    git(repo, "worktree", "add", "--detach", "--quiet", str(where), commit)
    for path in task.pass_to_pass:
        git(where, "checkout", base, "--", path, check=False)  # test edits are not graded
    for name, source in ((task.fail_to_pass[0], task.regression_test), (task.hidden_to_pass[0], task.hidden_test)):
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    visible = run_check(pytest_command(task.fail_to_pass + task.pass_to_pass), where, timeout_s=TEST_TIMEOUT_S)
    hidden = run_check(pytest_command(task.hidden_to_pass), where, timeout_s=TEST_TIMEOUT_S)
    return {"visible_passed": visible.passed, "hidden_passed": hidden.passed,
            "hidden_failing": hidden.failing or []}


def _graded_commit(repo: Path, run: dict[str, Any], base: str) -> str:
    """What the ticket committed: its run's head commit, else its branch, else the base."""
    for ref in (run.get("head_commit"), run.get("branch")):
        if ref and git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).returncode == 0:
            return out(repo, "rev-parse", f"{ref}^{{commit}}")
    return base


# -- one task, one arm ----------------------------------------------------------------------------

def run_arm(task: SdeTask, arm: str, *, boltons: Path, spec: BackendSpec, decoys: list[Chat], fake: bool,
            env: dict[str, str], max_rounds: int, work_dir: Path | None = None) -> dict[str, Any]:
    memory_on = arm == ARMS[0]
    with tempfile.TemporaryDirectory(prefix=f"middle-bench-sde-{task.name}-", dir=work_dir) as tmp:
        root = Path(tmp)
        repo = root / "repo"
        base = build_repo(task, repo, boltons, root / "home", env)
        write_project(root, task, spec if memory_on else None, max_rounds)
        deciding = import_memory(root, task, decoys, env) if memory_on else None
        proc = _middle(root, env, "run", *(["--fake"] if fake else []), task.name)
        record = read_run(root, task)
        if record is None:
            raise ConfigError(f"`middle run` did not start {task.name}: {_tail(proc)}")
        run = record["run"]
        wanted = decision_ids(root, task, deciding, env) if memory_on else None
        graded = grade(task, repo, _graded_commit(repo, run, base), base, root / "graded")
    return {"task": task.name, "arm": arm, "source": task.source, "category": task.category,
            "backend": spec.label if memory_on else "none", "status": run["status"],
            "solved": graded["visible_passed"] and graded["hidden_passed"], **graded,
            "check_status": run.get("check_status"), "corrections": int(run.get("corrections") or 0),
            "turns": record["turns"], "offline": bool(run.get("offline")),
            # A run on the fake model costs nothing: its dollars are made up from made-up usage.
            "cost_usd": 0.0 if run.get("offline") else float(run.get("total_cost_usd") or 0.0),
            "decision_recalled": None if wanted is None else bool(wanted & record["shown"]),
            "reason": run.get("reason") or ""}


def totals(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm: tasks, solved, pass rate, mean corrections and turns, total cost, and how often
    memory showed the agent the decision (of the tasks where that is known)."""
    rows = []
    for arm in ARMS:
        mine = [r for r in results if r["arm"] == arm]
        if not mine:
            continue
        known = [r["decision_recalled"] for r in mine if r["decision_recalled"] is not None]
        rows.append({"arm": arm, "tasks": len(mine), "solved": sum(r["solved"] for r in mine),
                     "pass_rate": sum(r["solved"] for r in mine) / len(mine),
                     "hidden_passed": sum(r["hidden_passed"] for r in mine),
                     "mean_corrections": sum(r["corrections"] for r in mine) / len(mine),
                     "mean_turns": sum(r["turns"] for r in mine) / len(mine),
                     "cost_usd": sum(r["cost_usd"] for r in mine),
                     "offline": all(r.get("offline") for r in mine),
                     "decision_recalled": f"{sum(known)} of {len(known)}" if known else "-"})
    return rows


def check_boltons(boltons: Path) -> Path:
    boltons = Path(boltons).expanduser()
    if not boltons.is_dir():
        raise ConfigError(f"no boltons clone at {boltons}: {GET_BOLTONS} {boltons} (or pass --boltons PATH)")
    try:
        out(boltons, "rev-parse", "--verify", "HEAD^{commit}")
    except GitError:
        raise ConfigError(f"{boltons} is not a git clone of boltons with its history: {GET_BOLTONS} "
                          "and pass that folder with --boltons") from None
    return boltons


def run_sde(checkout: Path, boltons: Path, *, tasks: Sequence[str] = (), limit: int | None = None,
            backend: str = "hybrid", fake: bool = False, max_rounds: int = MAX_ROUNDS,
            environ: dict[str, str] | None = None, progress: Progress = no_progress,
            work_dir: Path | None = None) -> dict[str, Any]:
    """Each chosen task with memory on, then off; the rows and the totals per arm. Every input is
    checked before the first task is built."""
    from orchestrator.plugins.manager import registry

    chosen = select_tasks(Path(checkout), tasks, limit)
    boltons = check_boltons(boltons)
    spec = BackendSpec.parse(backend)
    if spec.engine != "sqlite":
        raise ConfigError(f"--backend {backend}: each run keeps its memory in its own folder; give a "
                          "backend name without @postgres")
    registry().backend_options(spec.name, spec.options)  # an unknown backend or option fails here
    env = child_env(dict(os.environ if environ is None else environ), fake)
    if not fake and not env.get("ANTHROPIC_API_KEY"):
        raise ConfigError("ANTHROPIC_API_KEY is not set: sde-bench needs a real model to measure anything "
                          "(export the key), or pass --fake to check the wiring offline")
    decoys = load_decoys(Path(checkout))
    advance = progress(f"sde-bench: {len(chosen)} task(s), memory on and off", 2 * len(chosen))
    results = []
    for task in chosen:
        for arm in ARMS:
            results.append(run_arm(task, arm, boltons=boltons, spec=spec, decoys=decoys, fake=fake, env=env,
                                   max_rounds=max_rounds, work_dir=work_dir))
            advance(1)
    return {"dataset": f"sde-bench at {Path(checkout).resolve()} ({len(chosen)} task(s)), boltons at "
                       f"{boltons.resolve()}",
            "kind": "sde", "backend": spec.label, "model": "the offline fake" if fake else "the API",
            "max_rounds": max_rounds, "decoys": len(decoys), "results": results, "totals": totals(results)}
