"""`middle bench sde DIR`: sde-bench's tasks end to end, memory on against off, on a tiny checkout
in sde-bench's exact layout (task folders with build.py and tasks/main/{task.json,
regression_test.py, hidden_test.py}, gen/traps.py, gen/decoy_conversations.json) and a tiny
stand-in for boltons as a local git repository.

The two tasks are made for the offline fake model, which creates the files its prompt asks for
as ``Create `path` with:`` and, after a failed check, reads the check's output as its next
prompt: `value` (a decision chat) asks for a value the repro rejects, whose output then asks for
the decided one (one correction, the hidden test passes); `limit` (a decision commit) asks for
the naive value the repro accepts (no correction, the hidden test fails)."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing import make_repo
from orchestrator.workspace.git import out

FENCE = "`" * 3

# The two shapes of sde-bench's build.py (a planted module; a history task, whose decision commit a
# misleading `perf:` commit breaks), as the generator emits them: the same start, then their own.
_BUILD_START = '''\
import sys, os, shutil, subprocess
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gen"))
from traps import TRAPS
{imports}
HOST = Path(os.environ.get("SDEBENCH_BOLTONS_HOST") or (Path.home() / "dev" / "_sdebench_hosts" / "boltons"))
REF = '{ref}'
TRAP = TRAPS['{name}']
{helpers}

def main():
    out = Path(sys.argv[1])
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(HOST, out, ignore=shutil.ignore_patterns(".venv", "__pycache__", ".pytest_cache", "*.pyc"))
    subprocess.run(["git", "-C", str(out), "checkout", "-q", REF], check=True)
    subprocess.run(["git", "-C", str(out), "checkout", "-q", "-B", "main"], check=True)
    pkg = TRAP["pkg"]
    (out / pkg).mkdir(exist_ok=True)
    (out / pkg / "__init__.py").write_text(TRAP["init"])
    mp = out / TRAP["module"]; mp.parent.mkdir(parents=True, exist_ok=True)
    for p in (out / "tests").glob("test_*.py"):       # focus grading on the planted module
        p.unlink()
    (out / "tests" / ("test_" + '{name}' + ".py")).write_text(TRAP["existing_test"])
'''
_BUILD_END = '''

if __name__ == "__main__":
    main()
'''
_PLANTED = """\
    mp.write_text(TRAP["bug"])
    subprocess.run(["git", "-C", str(out), "add", "-A"], check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x",
           "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x"}
    subprocess.run(["git", "-C", str(out), "commit", "-q", "-m", "feat: add " + pkg + " module"], env=env, check=True)
"""
_HISTORY_HELPERS = """SUBJ, BODY = H_MSG['{name}']


def _commit(out, msg):
    subprocess.run(["git", "-C", str(out), "add", "-A"], check=True)
    env = {{**os.environ, "GIT_AUTHOR_NAME": "Priya N.", "GIT_AUTHOR_EMAIL": "p@e.com",
           "GIT_COMMITTER_NAME": "Priya N.", "GIT_COMMITTER_EMAIL": "p@e.com"}}
    subprocess.run(["git", "-C", str(out), "commit", "-q", "-m", msg], env=env, check=True)
"""
_HISTORY = """\
    mp.write_text(TRAP["correct"])           # the decision, with its rationale
    _commit(out, SUBJ + "\\n\\n" + BODY)
    (out / "CHANGELOG.md").write_text("# Changelog\\n\\n- internal cleanups\\n")
    _commit(out, "docs: changelog housekeeping")
    mp.write_text(TRAP["bug"])               # the regression, with a misleading message (HEAD)
    _commit(out, "perf: simplify " + Path(TRAP["module"]).stem)
"""


def build_script(ref: str, name: str, history: bool) -> str:
    helpers = _HISTORY_HELPERS.format(name=name) if history else ""
    imports = "from emit_host_h import H_MSG\n" if history else ""
    return (
        _BUILD_START.format(ref=ref, name=name, imports=imports, helpers=helpers)
        + (_HISTORY if history else _PLANTED)
        + _BUILD_END
    )


def _trap(name: str, pkg: str, constant: str, bug: int, correct: int) -> dict[str, str]:
    return {
        "pkg": pkg,
        "module": f"{pkg}/{name}.py",
        "init": "",
        "bug": f"{constant} = {bug}\n",
        "correct": f"{constant} = {correct}\n",
        "existing_test": f"from {pkg}.{name} import {constant}\n\n\ndef test_{name}_is_a_whole_number():\n"
        f"    assert isinstance({constant}, int)\n",
    }


def _create(path: str, line: str) -> str:
    return f"Create `{path}` with:\n{FENCE}python\n{line}\n{FENCE}\n"


# The repro of `value` prints what to write when it fails: the fake model's next prompt.
VALUE_REPRO = textwrap.dedent("""\
    from calc.value import VALUE

    FIX = {fix!r}


    def test_value_is_big_enough():
        if VALUE < 5:
            print(FIX)
        assert VALUE >= 5
    """).format(fix=_create("calc/value.py", "VALUE = 7"))
LIMIT_REPRO = "from calc.limit import LIMIT\n\n\ndef test_limit_is_big_enough():\n    assert LIMIT >= 5\n"
VALUE_CHAT = [
    {"role": "user", "text": "The value must be exactly 7: we measured it against the upstream."},
    {"role": "assistant", "text": "Settled: VALUE is exactly 7, not a round number."},
]
DECISION_SUBJECT = "fix: pin LIMIT at the measured 7"


def _task(folder: Path, task: dict, repro: str, hidden: str) -> None:
    (folder / "tasks" / "main").mkdir(parents=True)
    (folder / "tasks" / "main" / "task.json").write_text(json.dumps(task, indent=2))
    (folder / "tasks" / "main" / "regression_test.py").write_text(repro)
    (folder / "tasks" / "main" / "hidden_test.py").write_text(hidden)


@pytest.fixture
def boltons(tmp_path) -> Path:
    """A stand-in for the boltons clone: a package, a test suite the builds drop, some history."""
    repo = make_repo(
        tmp_path / "boltons",
        {
            "boltons/__init__.py": "",
            "README.md": "# boltons\n",
            "tests/test_strutils.py": "def test_nothing():\n    pass\n",
        },
    )
    (repo / "boltons" / "strutils.py").write_text("def slugify(text):\n    return text.lower()\n")
    out(repo, "add", "-A")
    out(
        repo,
        "-c",
        "user.name=Mahmoud",
        "-c",
        "user.email=m@e.com",
        "commit",
        "-q",
        "-m",
        "strutils: add slugify for readable identifiers",
    )
    return repo


@pytest.fixture
def checkout(tmp_path, boltons) -> Path:
    """Two tasks in sde-bench's layout: `value` (a conversation task) and `limit` (a history one)."""
    root = tmp_path / "sde-bench"
    ref = out(boltons, "rev-parse", "HEAD")
    (root / "gen").mkdir(parents=True)
    traps = {"value": _trap("value", "calc", "VALUE", 1, 7), "limit": _trap("limit", "calc", "LIMIT", 1, 7)}
    (root / "gen" / "traps.py").write_text(f"TRAPS = {traps!r}\n")
    (root / "gen" / "emit_host_h.py").write_text(
        f"H_MSG = {{'limit': ({DECISION_SUBJECT!r}, 'LIMIT is 7, measured; do not round it to 5 or 10.')}}\n"
    )
    decoys = [
        {"topic": t, "id": f"decoy-{i}", "turns": [{"role": "user", "text": q}, {"role": "assistant", "text": a}]}
        for i, (t, q, a) in enumerate(
            [
                ("docs", "Why bump the docs version by hand?", "Sphinx reads conf.py before the package is installed."),
                ("fileutils", "Is atomic_save durable after a power cut?", "Yes: it calls fsync before the rename."),
            ]
        )
    ]
    (root / "gen" / "decoy_conversations.json").write_text(json.dumps(decoys, indent=1))
    common = {
        "build": "build.py",
        "tier": "planted",
        "regression_test_file": "regression_test.py",
        "hidden_test_file": "hidden_test.py",
        "fail_to_pass": ["tests/test_regression.py"],
        "hidden_to_pass": ["tests/test_hidden.py"],
        "host": "boltons@" + ref[:7],
    }
    value = root / "boltons-value"
    _task(
        value,
        {
            **common,
            "task_id": "boltons-value-001",
            "codebase": "boltons-value",
            "source": "conversation",
            "category": "numeric-policy",
            "module": "calc/value.py",
            "pass_to_pass": ["tests/test_value.py"],
            "bug_report": "The value is too small for the upstream. A failing repro is at tests/test_regression.py.\n\n"
            + _create("calc/value.py", "VALUE = 3"),
            "conversations": VALUE_CHAT,
            "policy": "exactly 7",
        },
        VALUE_REPRO,
        "from calc.value import VALUE\n\n\ndef test_value_is_the_decided_seven():\n    assert VALUE == 7\n",
    )
    (value / "build.py").write_text(build_script(ref, "value", history=False))
    limit = root / "boltons-limit-history"
    _task(
        limit,
        {
            **common,
            "task_id": "boltons-limit-history-001",
            "codebase": "boltons-limit-history",
            "source": "history",
            "category": "numeric-policy",
            "module": "calc/limit.py",
            "pass_to_pass": ["tests/test_limit.py"],
            "cause_subject": "perf: simplify limit",
            "decision_subject": DECISION_SUBJECT,
            "policy": "exactly 7",
            "bug_report": "The limit is too low and jobs are cut off. "
            "A failing repro is at tests/test_regression.py.\n\n"
            + _create("calc/limit.py", "LIMIT = 5"),
        },
        LIMIT_REPRO,
        "from calc.limit import LIMIT\n\n\ndef test_limit_is_the_decided_seven():\n    assert LIMIT == 7\n",
    )
    (limit / "build.py").write_text(build_script(ref, "limit", history=True))
    (root / "MANIFEST.json").write_text(json.dumps({"dataset": "sde-bench", "n_tasks": 2}))
    return make_repo(root)  # a clone of the dataset: the run must leave it as it was


def _one_error(result) -> str:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_wrong_inputs_are_one_error_line_each_before_anything_is_built(tmp_path, checkout, boltons):
    runner = CliRunner()
    bench = ["bench", "sde", "--no-progress", "--fake"]
    not_sde = tmp_path / "not-sde"
    not_sde.mkdir()
    line = _one_error(runner.invoke(main, [*bench, str(not_sde), "--boltons", str(boltons)]))
    assert "is not an sde-bench checkout" in line and "git clone https://github.com/vectorize-io/sde-bench" in line
    line = _one_error(runner.invoke(main, [*bench, str(checkout), "--boltons", str(tmp_path / "nowhere")]))
    assert "no boltons clone at" in line and "git clone https://github.com/mahmoud/boltons" in line
    line = _one_error(runner.invoke(main, [*bench, str(checkout), "--boltons", str(not_sde)]))
    assert "is not a git clone of boltons" in line
    line = _one_error(runner.invoke(main, [*bench, str(checkout), "--boltons", str(boltons), "--task", "nope"]))
    assert "no task 'nope'" in line and "limit-history, value" in line
    line = _one_error(runner.invoke(main, [*bench, str(checkout), "--boltons", str(boltons), "--backend", "nosuch"]))
    assert "unknown memory backend 'nosuch'" in line
    line = _one_error(
        runner.invoke(
            main,
            ["bench", "sde", "--no-progress", str(checkout), "--boltons", str(boltons)],
            env={"ANTHROPIC_API_KEY": ""},
        )
    )
    assert "ANTHROPIC_API_KEY is not set" in line and "--fake" in line
    bad = checkout / "boltons-value" / "tasks" / "main" / "task.json"
    bad.write_text("{not json")
    line = _one_error(runner.invoke(main, [*bench, str(checkout), "--boltons", str(boltons), "--task", "value"]))
    assert str(bad) in line and "is not JSON" in line
    assert not list(Path(tempfile.gettempdir()).glob("middle-bench-sde-*"))  # nothing was built


def test_tasks_are_chosen_by_folder_short_name_or_task_id(checkout):
    from orchestrator.bench.sde_tasks import select_tasks

    assert [t.name for t in select_tasks(checkout)] == ["boltons-limit-history", "boltons-value"]
    assert [t.name for t in select_tasks(checkout, ["value", "boltons-limit-history-001"])] == [
        "boltons-value",
        "boltons-limit-history",
    ]
    assert [t.name for t in select_tasks(checkout, limit=1)] == ["boltons-limit-history"]
    value = select_tasks(checkout, ["boltons-value"])[0]
    assert value.chats == [[("user", VALUE_CHAT[0]["text"]), ("assistant", VALUE_CHAT[1]["text"])]]


def test_the_chats_are_imported_in_a_shuffled_order_with_the_decision_chats_in_their_own(tmp_path, checkout):
    from orchestrator.bench.sde import chat_files
    from orchestrator.bench.sde_tasks import select_tasks

    task = select_tasks(checkout, ["value"])[0]
    rule, amendment = [("user", "keep the latest")], [("user", "amended: keep the fullest")]
    task = task.__class__(**{**task.__dict__, "chats": [rule, amendment]})
    decoys = [[("user", f"decoy {i}")] for i in range(6)]
    deciding = chat_files(tmp_path / "chats", task, decoys, now=1_000_000.0)
    files = sorted((tmp_path / "chats").iterdir())
    assert len(files) == 8 and deciding.read_text() == "User: amended: keep the fullest\n"
    texts = [f.read_text() for f in files]
    assert texts.index("User: keep the latest\n") < texts.index("User: amended: keep the fullest\n")
    times = [f.stat().st_mtime for f in files]
    assert times == sorted(times) and times[-1] == 1_000_000.0 - 25 * 3600


@pytest.mark.slow
@pytest.mark.cli
def test_two_tasks_end_to_end_on_the_fake_model_one_solved_one_not(
    tmp_path, checkout, boltons, claude_cli, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    monkeypatch.setenv("MIDDLE_MEMORY_BACKEND", "dense")  # the benchmark's own settings win
    monkeypatch.setenv("MIDDLE_CODING_AGENT_OPTIONS", json.dumps({"cli_path": claude_cli}))  # kept
    before = (
        out(checkout, "status", "--porcelain", "--ignored"),
        out(boltons, "status", "--porcelain", "--ignored"),
        out(boltons, "rev-parse", "HEAD"),
    )
    monkeypatch.chdir(tmp_path)  # the paths as a user types them, relative
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "bench",
            "sde",
            checkout.name,
            "--boltons",
            boltons.name,
            "--fake",
            "--backend",
            "bm25",
            "--json",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {(r["task"], r["arm"]): r for r in report["results"]}
    assert list(rows) == [
        ("boltons-limit-history", "memory on"),
        ("boltons-limit-history", "memory off"),
        ("boltons-value", "memory on"),
        ("boltons-value", "memory off"),
    ]
    for arm in ("memory on", "memory off"):
        value, limit = rows[("boltons-value", arm)], rows[("boltons-limit-history", arm)]
        # value: the repro failed once (a correction), the decided value came from its output.
        assert (value["status"], value["check_status"], value["corrections"]) == ("complete", "passed", 1)
        assert value["solved"] and value["hidden_passed"] and value["visible_passed"] and value["turns"] == 2
        # limit: the naive value passes the repro and the check, and fails the hidden test.
        assert (limit["status"], limit["check_status"], limit["corrections"]) == ("complete", "passed", 0)
        assert limit["visible_passed"] and not limit["hidden_passed"] and not limit["solved"]
        assert limit["hidden_failing"] == ["tests/test_hidden.py::test_limit_is_the_decided_seven"]
        # The fake model reports made-up usage: a run on it cost nothing, and says so.
        assert value["cost_usd"] == 0 and limit["cost_usd"] == 0 and value["offline"] and limit["offline"]
    # Memory on showed the agent the decision (the chat, the commit); memory off has none to show.
    assert rows[("boltons-value", "memory on")]["decision_recalled"] is True
    assert rows[("boltons-limit-history", "memory on")]["decision_recalled"] is True
    assert rows[("boltons-value", "memory on")]["backend"] == "bm25"
    assert {rows[(t, "memory off")]["decision_recalled"] for t in ("boltons-value", "boltons-limit-history")} == {None}
    assert report["decoys"] == 2 and report["backend"] == "bm25"
    assert [
        (t["arm"], t["tasks"], t["solved"], t["pass_rate"], t["mean_corrections"], t["decision_recalled"])
        for t in report["totals"]
    ] == [("memory on", 2, 1, 0.5, 0.5, "2 of 2"), ("memory off", 2, 1, 0.5, 0.5, "-")]
    # Nothing is left behind, and the checkout and the clone are as they were.
    assert list((tmp_path / "scratch").iterdir()) == []
    assert before == (
        out(checkout, "status", "--porcelain", "--ignored"),
        out(boltons, "status", "--porcelain", "--ignored"),
        out(boltons, "rev-parse", "HEAD"),
    )
    # The table says the same.
    from orchestrator.bench import report as shared
    from orchestrator.bench.sde_cli import print_report

    with shared.console.capture() as captured:
        print_report(report)
    table = captured.get()
    assert "boltons-value" in table and "pass" in table and "FAIL" in table and "2 of 2" in table
    assert "offline model, no cost" in table and "$0.02" not in table and "0.02" not in table


@pytest.mark.slow
@pytest.mark.cli
def test_a_real_model_run_reads_the_api_from_the_environment_and_memory_reaches_only_the_on_arm(
    tmp_path, checkout, boltons, claude_cli, fake_api, claude_env
):
    """The path a real model takes (ANTHROPIC_* from the environment), on the scripted fake
    Messages API: the middle agent's planning request carries the decision chat with memory on,
    and nothing of it with memory off."""
    from orchestrator.bench.sde import run_sde
    from orchestrator.fake_api import reply, text, tool_use, working_directory

    def write_value(body):
        return reply(
            tool_use("Write", {"file_path": f"{working_directory(body)}/calc/value.py", "content": "VALUE = 7\n"})
        )

    for _ in range(2):  # memory on, then off: plan, one turn, complete
        fake_api.script.agent(
            json.dumps({"prompt": "Set VALUE to 7 in calc/value.py."}),
            json.dumps({"complete": True, "summary": "VALUE is 7.", "next_prompt": ""}),
        )
        fake_api.script.coding_agent(write_value, reply(text("Wrote calc/value.py.")))
    environ = {**os.environ, **claude_env, "MIDDLE_CODING_AGENT_OPTIONS": json.dumps({"cli_path": claude_cli})}
    report = run_sde(checkout, boltons, tasks=["value"], backend="bm25", environ=environ, work_dir=tmp_path)
    assert [(r["arm"], r["solved"], r["corrections"], r["turns"]) for r in report["results"]] == [
        ("memory on", True, 0, 1),
        ("memory off", True, 0, 1),
    ]
    # The planning requests (the others carry the plan's prompt): memory on, then off.
    plans = [json.dumps(r.body) for r in fake_api.requests_for("agent") if "Set VALUE" not in json.dumps(r.body)]
    assert len(plans) == 2
    assert VALUE_CHAT[0]["text"] in plans[0] and VALUE_CHAT[0]["text"] not in plans[1]
    assert report["model"] == "the API" and not list(tmp_path.glob("middle-bench-sde-*"))
