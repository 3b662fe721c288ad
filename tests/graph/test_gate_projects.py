"""No broken ticket gets through the gate, on the projects people have: each project's base
already fails one check (a known bug, a lint problem), and tickets make it worse, leave it no
worse, fix it, delete or skip the failing test, or break the check itself. Through the real
graph, store, git worktrees and the real runners (pytest, unittest, `node --test` with its JUnit
reporter, ruff, mypy; go vet where Go is installed), with the scripted middle agent.

Every ticket gets no correction round (`max_rounds = 0`), so a check worse than its base fails
the ticket at once; the verdict, its label and what the middle agent would read are asserted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from graph_helpers import make_orchestrator

from orchestrator.config.settings import Config
from orchestrator.errors import CheckCannotStart
from orchestrator.testing import make_repo
from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
from tickets.model import Ticket

PY = sys.executable
Edit = Callable[[Path], None]


def run_ticket(tmp_path: Path, files: dict[str, str], commands: list[Any], edit: Edit,
               fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ticket whose single turn applies `edit` to its worktree, then its checks: what ended."""
    repo = make_repo(tmp_path / "repo", files)
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), agent={"max_turns": 4, "max_cost_usd": 1.0},
                 memory={"backend": "none"}, check={"commands": commands, "max_rounds": 0, "timeout_s": 120})
    llm = ScriptedAgentLLM([plan_reply("Do the ticket"), decision_reply(True, "Done.")])

    def act(prompt: str, cwd: Path) -> str:
        edit(cwd)
        return "Done."

    with make_orchestrator(cfg, llm, RecordingCodingAgent([act])) as orch:
        orch.store.upsert_ticket(Ticket(id="t1", project_id="p", title="Change it", project_path=str(repo),
                                        fields=fields or {}))
        try:
            outcome: Any = orch.run_ticket("t1")
        except CheckCannotStart as exc:  # the user's check command is wrong: their error, not an outcome
            outcome = exc
        run = orch.store.latest_run("t1")
        events = [e["data"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "check"]
        notes = [e["data"]["text"] for e in orch.store.list_events(ticket_id="t1") if e["kind"] == "note"]
        status = orch.store.get_ticket("t1").status.value
    return {"outcome": outcome, "run": run, "events": events, "notes": notes, "llm": llm,
            "final": events[-1] if events else None, "status": status}


def assert_cannot_run(r: dict[str, Any], why: str) -> None:
    """The check cannot run on the base: an error naming it, before any turn, the ticket still pending."""
    assert isinstance(r["outcome"], CheckCannotStart), r["outcome"]
    assert "cannot run on the base commit" in str(r["outcome"]) and why in str(r["outcome"])
    assert r["status"] == "pending" and r["llm"].calls == []  # no turn ran, nothing was paid for


def write(rel: str, text: str) -> Edit:
    def edit(cwd: Path) -> None:
        (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
        (cwd / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return edit


def delete(rel: str) -> Edit:
    return lambda cwd: (cwd / rel).unlink()


def assert_failed(r: dict[str, Any]) -> None:
    assert r["outcome"].status == "failed", r["outcome"].reason
    assert r["run"]["check_status"] == "failed"
    assert r["final"]["outcome"] == "failed" and r["final"]["label"] == "failed"


def assert_no_worse(r: dict[str, Any], *already: str) -> None:
    assert r["outcome"].status == "complete", r["outcome"].reason
    assert r["run"]["check_status"] == "no-worse"
    assert r["final"]["outcome"] == "no-worse"
    for name in already:
        assert name in r["run"]["check_note"] and name in r["final"]["label"]
    assert r["final"]["label"].startswith("no worse (")


# -- a pytest project: parametrised ids with spaces and Unicode ---------------------------------

PYTEST_FILES = {
    "calc.py": "VALUE = 1\n\n\ndef add(a, b):\n    return a + b\n",
    "test_calc.py": textwrap.dedent("""\
        import pytest

        import calc


        def test_known_bug():  # already failing on the base
            assert calc.VALUE == 2


        @pytest.mark.parametrize("words", ["two words", "naïve café"])
        def test_identity(words):
            assert calc.add(words, "") == words


        def test_add():
            assert calc.add(1, 2) == 3
    """),
}
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
UPPER_ADD = "VALUE = 1\n\n\ndef add(a, b):\n    return (a + b).upper() if isinstance(a, str) else a + b\n"


def test_pytest_a_ticket_that_breaks_a_parametrised_test_with_spaces_fails(tmp_path):
    r = run_ticket(tmp_path, PYTEST_FILES, [PYTEST], write("calc.py", UPPER_ADD))
    assert_failed(r)
    assert "test_calc.py::test_identity[two words]" in r["final"]["new_failures"]
    assert r["final"]["already_failing"] == ["test_calc.py::test_known_bug"]
    assert "Failing tests: test_calc.py::test_identity[two words]" in r["llm"].user_messages[-1] or \
        "still failing" in r["outcome"].reason


def test_pytest_a_ticket_that_leaves_the_known_failure_is_no_worse_and_says_which(tmp_path):
    r = run_ticket(tmp_path, PYTEST_FILES, [PYTEST], write("notes.py", "HELLO = 1\n"))
    assert_no_worse(r, "test_calc.py::test_known_bug")
    assert r["final"]["tests_run"] == 4
    assert any("already fails on the base commit (1 already failing on the base: test_calc.py::test_known_bug)"
               in n for n in r["notes"])


def test_pytest_a_ticket_that_fixes_the_known_failure_passes(tmp_path):
    fixed = "VALUE = 2\n\n\ndef add(a, b):\n    return a + b\n"
    r = run_ticket(tmp_path, PYTEST_FILES, [PYTEST], write("calc.py", fixed))
    assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed"


def test_pytest_deleting_the_failing_test_is_a_failure(tmp_path):
    without = PYTEST_FILES["test_calc.py"].replace("def test_known_bug():  # already failing on the base\n"
                                                   "    assert calc.VALUE == 2\n", "")
    r = run_ticket(tmp_path, PYTEST_FILES, [PYTEST], write("test_calc.py", without))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["test_calc.py::test_known_bug (removed)"]


def test_pytest_skipping_or_xfailing_the_failing_test_is_a_failure(tmp_path):
    for marker in ("@pytest.mark.skip(reason='later')", "@pytest.mark.xfail"):
        marked = PYTEST_FILES["test_calc.py"].replace("def test_known_bug():", f"{marker}\ndef test_known_bug():")
        r = run_ticket(tmp_path / marker[13:17], PYTEST_FILES, [PYTEST], write("test_calc.py", marked))
        assert_failed(r)
        assert r["final"]["removed_tests"] == ["test_calc.py::test_known_bug (skipped)"]


def test_pytest_a_ticket_may_remove_a_test_when_it_says_so(tmp_path):
    without = PYTEST_FILES["test_calc.py"].replace("def test_known_bug():  # already failing on the base\n"
                                                   "    assert calc.VALUE == 2\n", "")
    r = run_ticket(tmp_path, PYTEST_FILES, [PYTEST], write("test_calc.py", without),
                   fields={"allow_removed_tests": True})
    assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed"


def test_pytest_a_ticket_that_breaks_collection_fails_it_does_not_pass(tmp_path):
    r = run_ticket(tmp_path, PYTEST_FILES, [PYTEST], write("calc.py", "VALUE = (\n"))
    assert_failed(r)
    assert "could not run" in r["final"]["reason"] and "collection" in r["final"]["reason"]


@pytest.mark.parametrize("command, why", [
    (f"{PY} -m pytset -q", "No module named pytset"),
    (f"{PYTEST} -k no_such_test_anywhere", "pytest collected no tests"),
    (f"{PYTEST} --no-such-option", "pytest's usage error"),
])
def test_pytest_a_check_that_cannot_really_run_is_an_error_before_any_turn(tmp_path, command, why):
    assert_cannot_run(run_ticket(tmp_path, PYTEST_FILES, [command], write("calc.py", UPPER_ADD)), why)


def test_pytest_missing_from_the_worktrees_environment_is_an_error(tmp_path):
    bare = tmp_path / "bare-venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(bare)], check=True)
    r = run_ticket(tmp_path, PYTEST_FILES, [f"{bare}/bin/python -m pytest -q"], write("calc.py", UPPER_ADD))
    assert_cannot_run(r, "No module named pytest")


def test_every_test_failing_to_import_on_the_base_is_an_error(tmp_path):
    files = {**PYTEST_FILES, "test_calc.py": "import not_installed_anywhere\n\n\ndef test_a():\n    pass\n"}
    r = run_ticket(tmp_path, files, [PYTEST], write("calc.py", UPPER_ADD))
    assert_cannot_run(r, "collection or import error")


# -- a unittest project --------------------------------------------------------------------------

UNITTEST_FILES = {
    "calc.py": "VALUE = 1\n\n\ndef add(a, b):\n    return a + b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": textwrap.dedent("""\
        import unittest

        import calc


        class CalcTest(unittest.TestCase):
            def test_known_bug(self):  # already failing on the base
                self.assertEqual(calc.VALUE, 2)

            def test_add(self):
                self.assertEqual(calc.add(1, 2), 3)

            def test_words(self):
                self.assertEqual(calc.add("two ", "words"), "two words")
    """),
}
UNITTEST = f"{PY} -m unittest"


def test_unittest_a_ticket_that_breaks_another_test_fails(tmp_path):
    r = run_ticket(tmp_path, UNITTEST_FILES, [UNITTEST], write("calc.py", UPPER_ADD))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["tests.test_calc.CalcTest::test_words"]
    assert "(failures=1)" not in " ".join(r["final"]["new_failures"] + r["final"]["already_failing"])


def test_unittest_a_ticket_that_leaves_the_known_failure_is_no_worse(tmp_path):
    r = run_ticket(tmp_path, UNITTEST_FILES, [UNITTEST], write("notes.py", "HELLO = 1\n"))
    assert_no_worse(r, "tests.test_calc.CalcTest::test_known_bug")
    assert r["final"]["tests_run"] == 3


def test_unittest_deleting_the_failing_test_is_a_failure(tmp_path):
    without = UNITTEST_FILES["tests/test_calc.py"].replace(
        "    def test_known_bug(self):  # already failing on the base\n        self.assertEqual(calc.VALUE, 2)\n\n", "")
    r = run_ticket(tmp_path, UNITTEST_FILES, [UNITTEST], write("tests/test_calc.py", without))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["tests.test_calc.CalcTest::test_known_bug (removed)"]


def test_unittest_that_runs_no_tests_is_an_error(tmp_path):
    r = run_ticket(tmp_path, UNITTEST_FILES, [f"{UNITTEST} discover -s no_tests_here"], write("notes.py", "X = 1\n"))
    assert_cannot_run(r, "")


# -- a Node project: `node --test` with its JUnit reporter ---------------------------------------

NODE_TEST = {"run": "node --test --test-reporter=spec --test-reporter-destination=stdout "
                    "--test-reporter=junit --test-reporter-destination=junit.xml", "junit": "junit.xml"}
NODE_FILES = {
    "calc.js": "exports.VALUE = 1;\nexports.add = (a, b) => a + b;\n",
    "calc.test.js": textwrap.dedent("""\
        const test = require('node:test');
        const assert = require('node:assert');
        const calc = require('./calc.js');

        test('known bug', () => { assert.strictEqual(calc.VALUE, 2); });
        test('adds two words', () => { assert.strictEqual(calc.add('two ', 'words'), 'two words'); });
        test('adds numbers', () => { assert.strictEqual(calc.add(1, 2), 3); });
    """),
}
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


@needs_node
def test_node_a_ticket_that_breaks_another_test_fails(tmp_path):
    r = run_ticket(tmp_path, NODE_FILES, [NODE_TEST],
                   write("calc.js", "exports.VALUE = 1;\nexports.add = (a, b) => typeof a === 'string' ? "
                         "(a + b).toUpperCase() : a + b;\n"))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["test::adds two words"]


@needs_node
def test_node_a_ticket_that_leaves_the_known_failure_is_no_worse(tmp_path):
    r = run_ticket(tmp_path, NODE_FILES, [NODE_TEST], write("notes.js", "// nothing\n"))
    assert_no_worse(r, "test::known bug")


@needs_node
def test_node_deleting_the_failing_test_is_a_failure(tmp_path):
    known = "test('known bug', () => { assert.strictEqual(calc.VALUE, 2); });\n"
    without = NODE_FILES["calc.test.js"].replace(known, "")
    r = run_ticket(tmp_path, NODE_FILES, [NODE_TEST], write("calc.test.js", without))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["test::known bug (removed)"]


@needs_node
def test_node_a_report_that_is_not_written_is_an_error(tmp_path):
    r = run_ticket(tmp_path, NODE_FILES, [{"run": "node --test", "junit": "reports/junit.xml"}],
                   write("notes.js", "// nothing\n"))
    assert_cannot_run(r, "its JUnit report was not written (reports/junit.xml)")


# -- diagnostics: ruff and mypy -------------------------------------------------------------------

LINT_FILES = {"app.py": "import os\n\n\ndef f():\n    return 1\n"}  # one problem on the base: os unused
RUFF = "ruff check --no-cache app.py"


def test_ruff_one_problem_then_four_is_worse(tmp_path):
    r = run_ticket(tmp_path, LINT_FILES, [RUFF],
                   write("app.py", "import os\nimport sys\nimport json\nimport re\n\n\ndef f():\n    return 1\n"))
    assert_failed(r)
    assert len(r["final"]["new_failures"]) == 3 and all("[F401]" in f for f in r["final"]["new_failures"])


def test_ruff_the_same_problem_on_a_moved_line_is_no_worse(tmp_path):
    r = run_ticket(tmp_path, LINT_FILES, [RUFF],
                   write("app.py", '"""A module."""\n\nimport os\n\n\ndef f():\n    return 1\n\n\n'
                                   'def g():\n    return 2\n'))
    assert_no_worse(r, "app.py: [F401]")


def test_ruff_fixing_the_problem_passes(tmp_path):
    r = run_ticket(tmp_path, LINT_FILES, [RUFF], write("app.py", "def f():\n    return 1\n"))
    assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed"


def test_mypy_a_new_type_error_is_worse(tmp_path):
    files = {"typed.py": 'X: int = "a"\n'}
    cmd = {"run": f"{PY} -m mypy --no-incremental --cache-dir=/dev/null typed.py", "format": "diagnostics"}
    r = run_ticket(tmp_path, files, [cmd], write("typed.py", 'X: int = "a"\nY: str = 2\n'))
    assert_failed(r)
    assert r["final"]["new_failures"] == ['typed.py: [assignment] Incompatible types in assignment (expression has '
                                          'type "int", variable has type "str")']


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed here (apt-get install golang)")
def test_go_vet_a_new_problem_is_worse(tmp_path):
    files = {"go.mod": "module example.com/m\n\ngo 1.19\n",
             "main.go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Printf("%d\\n", "a")\n}\n'}
    worse = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Printf("%d\\n", "a")\n\tfmt.Printf("%s\\n", 1)\n}\n'
    r = run_ticket(tmp_path, files, ["go vet ./..."], write("main.go", worse))
    assert_failed(r)


# -- any other command: its exit code is trusted only when the base passes ------------------------

EXIT_FILES = {"check.sh": "#!/bin/sh\ntest -f fixed.txt || { echo 'not fixed'; exit 3; }\n"}


def test_a_command_with_no_report_failing_the_same_way_on_the_base_and_the_ticket_is_undecided(tmp_path):
    """Nothing tells a harmless ticket from one that breaks what the output does not name: it stops
    with its work kept, a person decides (not "the ticket must make it pass", false for a harmless one)."""
    r = run_ticket(tmp_path, EXIT_FILES, ["sh check.sh"], write("notes.txt", "hello\n"))
    assert r["outcome"].status == "failed" and r["run"]["check_status"] == "failed"
    assert r["final"]["outcome"] == "undecided" and "fails with the same output" in r["final"]["reason"]
    assert "cannot be judged" in r["outcome"].reason and "--despite-check" in r["outcome"].reason
    assert any("stops for you to decide" in n and "baseline = \"exit-code\"" in n for n in r["notes"])


def test_baseline_exit_code_accepts_the_same_exit_code_and_says_so(tmp_path):
    r = run_ticket(tmp_path, EXIT_FILES, [{"run": "sh check.sh", "baseline": "exit-code"}],
                   write("notes.txt", "hello\n"))
    assert_no_worse(r)
    assert r["final"]["label"] == "no worse (failing as on the base: exit 3)"


def test_a_tickets_own_bad_check_table_fails_that_ticket_with_one_clear_line(tmp_path):
    r = run_ticket(tmp_path, EXIT_FILES, ["sh check.sh"], write("notes.txt", "x\n"),
                   fields={"check": [{"run": "sh check.sh", "format": "xml"}]})
    assert r["outcome"].status == "failed"
    assert "the `check:` of ticket 't1': command 1: format:" in r["outcome"].reason
    assert r["llm"].calls == []


def test_a_person_allows_removing_a_test_in_the_front_matter_then_resume_and_feedback_pass(tmp_path):
    """The ticket removed the failing test and failed for it; the person decides that is right
    (`allow_removed_tests: true` in the ticket's file): `middle resume` runs the check again and
    passes. The same decision through a review round (`middle feedback`) on another ticket."""
    from tickets.source import load_ticket_file

    without = PYTEST_FILES["test_calc.py"].replace("def test_known_bug():  # already failing on the base\n"
                                                   "    assert calc.VALUE == 2\n", "")
    repo = make_repo(tmp_path / "repo", PYTEST_FILES)
    folder = tmp_path / "tickets"
    folder.mkdir()
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), agent={"max_turns": 4, "max_cost_usd": 1.0},
                 memory={"backend": "none"}, check={"commands": [PYTEST], "max_rounds": 0, "timeout_s": 120})
    llm = ScriptedAgentLLM([plan_reply("Remove the known bug's test"), decision_reply(True, "Removed it."),
                            plan_reply("Remove it"), decision_reply(True, "Removed it."),
                            plan_reply("Keep it removed"), decision_reply(True, "Kept.")])

    def remove(prompt: str, cwd: Path) -> str:
        (cwd / "test_calc.py").write_text(without, encoding="utf-8")
        return "Removed."

    with make_orchestrator(cfg, llm, RecordingCodingAgent([remove, remove, lambda p, c: "Nothing to do."])) as orch:
        for tid in ("t1", "t2"):
            path = folder / f"{tid}.md"
            path.write_text(f"---\nid: {tid}\ntitle: Drop the old test\nproject: p\n---\nRemove test_known_bug.\n")
            orch.store.upsert_ticket(load_ticket_file(path, repo))
        for tid in ("t1", "t2"):
            failed = orch.run_ticket(tid)
            assert failed.status == "failed" and "test(s) of the base not run" in failed.reason
        for tid in ("t1", "t2"):  # the person's decision, in each ticket's own file
            path = folder / f"{tid}.md"
            path.write_text(path.read_text().replace("project: p\n", "project: p\nallow_removed_tests: true\n"))
        resumed = orch.resume("t1")
        assert resumed.status == "complete", resumed.reason
        assert orch.store.latest_run("t1")["check_status"] == "passed"
        round_ = orch.feedback("t2", "Removing that test is right: it tested a bug we keep on purpose.")
        assert round_.status == "complete", round_.reason
        assert orch.store.latest_run("t2")["check_status"] == "passed"


def test_a_tickets_file_may_name_its_check_as_a_table_and_a_table_without_run_is_refused(tmp_path):
    from tickets.errors import TicketError
    from tickets.source import load_ticket_file

    head = "---\nid: t1\ntitle: T\nproject: p\n"
    good = tmp_path / "good.md"
    good.write_text(head + 'check:\n  - {run: "sh check.sh", baseline: "exit-code"}\n---\nDo it.\n')
    assert load_ticket_file(good, tmp_path).fields["check"] == [{"run": "sh check.sh", "baseline": "exit-code"}]
    for body, says in (('check:\n  - {junit: "r.xml"}\n', "'check' must be a list"),
                       ("allow_removed_tests: yes please\n", "'allow_removed_tests' must be true or false")):
        bad = tmp_path / "bad.md"
        bad.write_text(head + body + "---\nDo it.\n")
        with pytest.raises(TicketError, match=says):
            load_ticket_file(bad, tmp_path)
