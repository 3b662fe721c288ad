"""The check gate behind the wrappers projects put in CI (`make test`, tox, a shell script): the
runners behind them are asked for their reports through the environment and judged failure by
failure (orchestrator/checks/runners/wrapper.py). Through the real graph, store, git worktrees,
real make, tox and rspec, and the real pytest, as tests/graph/test_gate_projects.py does for
lines that name their runner. Each project's base already fails one test.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from test_gate_projects import assert_cannot_run, assert_failed, assert_no_worse, delete, run_ticket, write

PY = sys.executable
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

TEST_CALC = textwrap.dedent("""\
    import calc


    def test_known_bug():  # already failing on the base
        assert calc.VALUE == 2


    def test_add():
        assert calc.add(1, 2) == 3
""")
TEST_MORE = textwrap.dedent("""\
    import calc


    def test_add_strings():
        assert calc.add("a", "b") == "ab"
""")
CALC = "VALUE = 1\n\n\ndef add(a, b):\n    return a + b\n"
BROKEN_ADD = "VALUE = 1\n\n\ndef add(a, b):\n    return a - b if isinstance(a, int) else a + b\n"
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
MAKE_FILES = {"calc.py": CALC, "tests/test_calc.py": TEST_CALC, "more/test_more.py": TEST_MORE,
              # recipes are tab-indented; `twice` runs pytest on each folder (the first one fails on
              # the base) and fails if either did
              "Makefile": f"test:\n\t{PYTEST} tests more\n\n"
                          f"twice:\n\t{PYTEST} tests; s=$$?; {PYTEST} more && exit $$s\n\n"
                          # a step with no report: it fails when a TODO file is left behind
                          f"lint:\n\t{PY} -c \"import pathlib, sys; sys.exit(pathlib.Path('TODO').exists())\"\n"}


@needs_make
def test_make_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, MAKE_FILES, ["make test"], write("calc.py", BROKEN_ADD))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["tests/test_calc.py::test_add"]
    # make's own line for the recipe that failed is a failure too, on the base as on the ticket
    assert r["final"]["already_failing"] == ["(make) test: Error 1", "tests/test_calc.py::test_known_bug"]


@needs_make
def test_make_a_ticket_that_leaves_the_known_failure_is_no_worse_naming_it(tmp_path):
    r = run_ticket(tmp_path, MAKE_FILES, ["make test"], write("NOTES.md", "hello\n"))
    assert_no_worse(r, "tests/test_calc.py::test_known_bug")
    # make's line for the recipe that ran the tests is compared, not shown in the note beside them
    assert r["run"]["check_note"] == "1 already failing on the base: tests/test_calc.py::test_known_bug"
    assert "(make)" not in r["final"]["label"] and "(make) test: Error 1" in r["final"]["already_failing"]
    assert r["final"]["tests_run"] == 3


@needs_make
def test_make_a_ticket_that_deletes_the_failing_test_fails(tmp_path):
    without = TEST_CALC.replace("def test_known_bug():  # already failing on the base\n"
                                "    assert calc.VALUE == 2\n", "")
    r = run_ticket(tmp_path, MAKE_FILES, ["make test"], write("tests/test_calc.py", without))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["tests/test_calc.py::test_known_bug (removed)"]


@needs_make
def test_make_running_pytest_twice_keeps_the_first_runs_failures(tmp_path):
    # the second run rewrites pytest's report: the first run's is kept as it was written
    r = run_ticket(tmp_path, MAKE_FILES, ["make twice"], write("calc.py", BROKEN_ADD))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["tests/test_calc.py::test_add"]
    assert r["final"]["already_failing"] == ["(make) twice: Error 1", "tests/test_calc.py::test_known_bug"]


@needs_make
def test_make_running_pytest_twice_a_ticket_that_deletes_the_second_runs_test_fails(tmp_path):
    r = run_ticket(tmp_path, MAKE_FILES, ["make twice"], delete("more/test_more.py"))
    assert_failed(r)  # the second run's test is gone: a removed test, though that run itself passes
    assert r["final"]["removed_tests"] == ["more/test_more.py::test_add_strings (removed)"]


@needs_make
def test_make_k_a_ticket_that_breaks_a_step_with_no_report_beside_the_known_failure_fails(tmp_path):
    # the tests fail on the base already, so the exit code is the same: make's line names the step
    r = run_ticket(tmp_path, MAKE_FILES, ["make -k test lint"], write("TODO", "later\n"))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["(make) lint: Error 1"]
    assert r["final"]["already_failing"] == ["(make) test: Error 1", "tests/test_calc.py::test_known_bug"]


@needs_make
def test_make_with_a_target_it_does_not_have_cannot_run(tmp_path):
    assert_cannot_run(run_ticket(tmp_path, MAKE_FILES, ["make tset"], write("NOTES.md", "hello\n")),
                      "No rule to make target 'tset'")


@needs_make
def test_make_whose_pytest_collects_nothing_cannot_run(tmp_path):
    files = {**MAKE_FILES, "Makefile": f"test:\n\t{PYTEST} -k no_such_test_anywhere\n"}
    assert_cannot_run(run_ticket(tmp_path, files, ["make test"], write("NOTES.md", "hello\n")),
                      "collected no tests")


# -- tox: two envs, each running the same suite with the system's pytest (nothing downloaded), one
# with a pass_env of its own (which replaces [testenv]'s) --------------------------------------

# two envs on the system's Python: nothing installed, nothing downloaded
TOX_HEAD = textwrap.dedent("""\
    [tox]
    envlist = one, two
    skipsdist = true

    [testenv]
    skip_install = true
    system_site_packages = true
    allowlist_externals = *
""")
TOX_INI = TOX_HEAD + textwrap.dedent(f"""\
    commands = {PYTEST} tests

    [testenv:two]
    pass_env = HOME
""")


TOX = shutil.which("tox", path=str(Path(PY).parent)) or shutil.which("tox")


@pytest.mark.skipif(TOX is None, reason="tox is not installed (the test extra has it)")
def test_tox_with_two_envs_is_read_per_failure(tmp_path):
    files = {"calc.py": CALC, "tests/test_calc.py": TEST_CALC, "tox.ini": TOX_INI}
    # its envs outside the worktree: made once for the base's run and the ticket's
    r = run_ticket(tmp_path, files, [f"{TOX} -q --workdir {tmp_path / 'toxwork'}"], write("calc.py", BROKEN_ADD))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["tests/test_calc.py::test_add"]
    assert r["final"]["already_failing"] == ["tests/test_calc.py::test_known_bug"]
    assert r["final"]["tests_run"] == 2  # each env ran both: the same two tests


# -- a shell script running rspec twice ----------------------------------------------------------

SPEC_A = textwrap.dedent("""\
    require_relative "../lib/calc"

    RSpec.describe "Calc" do
      it("knows its value") { expect(VALUE).to eq(2) }  # already failing on the base
      it("adds") { expect(add(1, 2)).to eq(3) }
    end
""")
SPEC_B = textwrap.dedent("""\
    require_relative "../lib/calc"

    RSpec.describe "More" do
      it("adds strings") { expect(add("a", "b")).to eq("ab") }
    end
""")


@pytest.mark.skipif(shutil.which("rspec") is None, reason="rspec is not installed (.ci/run installs it)")
def test_a_script_running_rspec_twice_keeps_each_runs_report(tmp_path):
    script = "s=0\nrspec spec/a_spec.rb || s=1\nrspec more/b_spec.rb || s=1\nexit $s\n"  # fails if either did
    files = {"lib/calc.rb": "VALUE = 1\n\ndef add(a, b)\n  a + b\nend\n", "spec/a_spec.rb": SPEC_A,
             "more/b_spec.rb": SPEC_B, "scripts/test.sh": script}
    broken = "VALUE = 1\n\ndef add(a, b)\n  a.is_a?(Integer) ? a - b : a + b\nend\n"
    r = run_ticket(tmp_path, files, ["sh scripts/test.sh"], write("lib/calc.rb", broken))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["spec/a_spec.rb::Calc adds"]
    assert r["final"]["already_failing"] == ["spec/a_spec.rb::Calc knows its value"]
    fine = run_ticket(tmp_path / "fine", files, ["sh scripts/test.sh"], write("NOTES.md", "hello\n"))
    assert_no_worse(fine, "spec/a_spec.rb::Calc knows its value")
    assert fine["final"]["tests_run"] == 3


# -- `make test` running `python -m unittest -v` (more-itertools' Makefile), and tox running
# `{envpython} -m unittest` (its tox.ini): unittest asked for its report through PYTHONPATH ----

UNIT_CALC = textwrap.dedent("""\
    import unittest

    import calc


    class CalcTests(unittest.TestCase):
        def test_known_bug(self):  # already failing on the base
            self.assertEqual(calc.VALUE, 2)

        def test_add(self):
            \"\"\"A docstring: `-v` prints it on a line of its own.\"\"\"
            self.assertEqual(calc.add(1, 2), 3)

        def test_add_strings(self):
            self.assertEqual(calc.add("a", "b"), "ab")
""")
UNIT_FILES = {"calc.py": CALC, "tests/__init__.py": "", "tests/test_calc.py": UNIT_CALC,
              "Makefile": f"test:\n\t{PY} -m unittest -v $(tests)\n\n"
                          # the same tests run twice, under coverage's way of running them too
                          f"twice:\n\t{PY} -m unittest; s=$$?; {PY} -W default -m unittest && exit $$s\n"}


@needs_make
def test_make_running_unittest_a_ticket_that_leaves_the_known_failure_is_no_worse(tmp_path):
    r = run_ticket(tmp_path, UNIT_FILES, ["make test"], write("NOTES.md", "hello\n"))
    assert_no_worse(r, "tests.test_calc.CalcTests::test_known_bug")
    assert r["final"]["tests_run"] == 3


@needs_make
def test_make_running_unittest_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, UNIT_FILES, ["make twice"], write("calc.py", BROKEN_ADD))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["tests.test_calc.CalcTests::test_add"]


@needs_make
def test_make_running_unittest_a_ticket_that_skips_a_test_fails(tmp_path):
    skipped = UNIT_CALC.replace("    def test_add_strings", "    @unittest.skip('later')\n    def test_add_strings")
    r = run_ticket(tmp_path, UNIT_FILES, ["make test"], write("tests/test_calc.py", skipped))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["tests.test_calc.CalcTests::test_add_strings (skipped)"]


# -- boltons' tox.ini: `pytest --doctest-modules {env_site_packages_dir}/boltons` from `changedir =
# .tox`, the doctests of the package as each env installed it (copied there: nothing downloaded) --

DOCTEST_CALC = textwrap.dedent('''\
    VALUE = 1


    def add(a, b):
        """
        >>> add(1, 2)
        3
        """
        return a + b


    def value():
        """Already failing on the base.

        >>> value()
        2
        """
        return VALUE
''')
TOX_DOCTESTS = TOX_HEAD + textwrap.dedent(f"""\
    changedir = .tox
    commands_pre = {PY} -c "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2], dirs_exist_ok=True)" \\
        {{tox_root}}/calc {{env_site_packages_dir}}/calc
    commands = {PY} -m pytest -q -p no:cacheprovider --doctest-modules {{env_site_packages_dir}}/calc
""")


@pytest.mark.skipif(TOX is None, reason="tox is not installed (the test extra has it)")
def test_tox_doctests_of_the_installed_package_are_named_from_the_package(tmp_path):
    files = {"calc/__init__.py": DOCTEST_CALC, "tox.ini": TOX_DOCTESTS, ".gitignore": ".tox/\n"}
    broken = DOCTEST_CALC.replace("return a + b", "return a - b")
    r = run_ticket(tmp_path, files, [TOX], write("calc/__init__.py", broken))
    assert_failed(r)
    # one test in both envs, by its package's path: not `.tox/one/lib/python3.X/site-packages/calc/...`
    assert r["final"]["new_failures"] == ["calc/__init__.py::calc.add"]
    assert r["final"]["already_failing"] == ["calc/__init__.py::calc.value"]
    assert r["final"]["tests_run"] == 2


# -- python-fwt's justfile: `test *args:` running `uv run pytest -vvv {{args}}` (here the suite's
# own pytest, nothing downloaded) -----------------------------------------------------------------

JUST = shutil.which("just", path=str(Path(PY).parent)) or shutil.which("just")
JUST_FILES = {"calc.py": CALC, "tests/test_calc.py": TEST_CALC,
              "justfile": f"default:\n    @just --list\n\ntest *args:\n    {PYTEST} -vvv {{{{args}}}}\n"}


@pytest.mark.skipif(JUST is None, reason="just is not installed (the test extra has it: rust-just)")
def test_just_test_is_read_per_test_and_a_recipe_it_does_not_have_cannot_run(tmp_path):
    r = run_ticket(tmp_path, JUST_FILES, [f"{JUST} test"], write("calc.py", BROKEN_ADD))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["tests/test_calc.py::test_add"]
    assert r["final"]["already_failing"] == ["tests/test_calc.py::test_known_bug"]
    # just 1.x says `error: justfile does not contain recipe `tset``, lowercase
    assert_cannot_run(run_ticket(tmp_path / "typo", JUST_FILES, [f"{JUST} tset"], write("NOTES.md", "hello\n")),
                      "does not contain recipe `tset`")


# -- a recipe whose test run's exit code is thrown away (`pytest || true`, make's `-pytest`): the
# report still names what failed ------------------------------------------------------------------

@needs_make
@pytest.mark.parametrize("recipe", [f"{PYTEST} tests || true", f"-{PYTEST} tests"])
def test_make_a_recipe_that_ignores_the_tests_exit_code_still_fails_a_ticket_that_breaks_a_test(tmp_path, recipe):
    files = {**MAKE_FILES, "Makefile": f"test:\n\t{recipe}\n"}
    r = run_ticket(tmp_path, files, ["make test"], write("calc.py", BROKEN_ADD))
    assert_failed(r)
    assert "tests/test_calc.py::test_add" in r["final"]["new_failures"]
    assert "tests/test_calc.py::test_known_bug" in r["final"]["already_failing"]
    fine = run_ticket(tmp_path / "fine", files, ["make test"], write("NOTES.md", "hello\n"))
    assert_no_worse(fine, "tests/test_calc.py::test_known_bug")


# -- the tests and a linter in one line or one script (`pytest; ruff check .`): the linter names no
# step, its coded problems are compared beside the tests -------------------------------------------

RUFF = shutil.which("ruff", path=str(Path(PY).parent)) or shutil.which("ruff")
LINTED = "VALUE = 1\n\n\ndef add(a, b):\n    import os\n    return a + b\n"  # F401: `os` unused


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed (the test extra has it)")
@pytest.mark.parametrize("script", [False, True])
def test_tests_then_a_linter_a_ticket_that_adds_a_lint_problem_beside_the_known_failure_fails(tmp_path, script):
    line = f"{PYTEST} tests; s=$?; {RUFF} check --no-cache --isolated . || s=1; exit $s"
    files = {"calc.py": CALC, "tests/test_calc.py": TEST_CALC}
    if script:
        files["scripts/test.sh"], line = line + "\n", "sh scripts/test.sh"
    r = run_ticket(tmp_path, files, [line], write("calc.py", LINTED))
    assert_failed(r)
    assert [f for f in r["final"]["new_failures"] if "F401" in f] == ["calc.py: [F401] `os` imported but unused"]
    assert r["final"]["already_failing"] == ["tests/test_calc.py::test_known_bug"]
    fine = run_ticket(tmp_path / "fine", files, [line], write("NOTES.md", "hello\n"))
    assert_no_worse(fine, "tests/test_calc.py::test_known_bug")
