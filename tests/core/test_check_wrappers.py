"""A line that names no runner (make, tox, nox, a script) read through the reports the runners
behind it write (orchestrator/checks/runners/wrapper.py): what the environment asks for, how runs
are counted against reports, how several runs' reports merge, what a wrapper that cannot run says,
and, with the real make, pytest and nox, that a report rewritten by a later run is kept."""

from __future__ import annotations

import shlex
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.checks import junit
from orchestrator.checks.instrument import prepare
from orchestrator.checks.runner import JUNIT, run_check
from orchestrator.checks.runners import rspec, wrapper
from orchestrator.config.settings import CheckCommand

PY = sys.executable
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"


@pytest.mark.parametrize("line", ["make test", "tox -e py311", "nox -s tests", "./scripts/test.sh", "just test",
                                  "hatch test"])
def test_a_line_with_no_runner_asks_every_env_carried_runner_its_line_untouched(tmp_path, line):
    p = prepare(CheckCommand(run=line), tmp_path, {"PYTEST_ADDOPTS": "-x", "SPEC_OPTS": "--order defined",
                                                  "TOX_OVERRIDE": "testenv.deps=pytest"})
    assert p.runner == wrapper.RUNNER and p.line == line
    opts = shlex.split(p.env["PYTEST_ADDOPTS"])
    assert opts[0] == "-x" and f"--junitxml={tmp_path / wrapper.PYTEST_REPORT}" in opts  # the user's kept first
    assert "${TOX_ENV_NAME}" in wrapper.PYTEST_REPORT  # one file per tox env, expanded by pytest
    assert shlex.split(p.env["SPEC_OPTS"]) == ["--order", "defined", "--require", str(rspec.REQUIRE), "--no-fail-fast"]
    assert p.env["MIDDLE_RSPEC_JSON"] == str(tmp_path / "rspec-{pid}.json")
    overrides = p.env["TOX_OVERRIDE"].split(";")
    assert overrides[0] == "testenv.deps=pytest"  # the user's own override kept
    assert "testenv.pass_env+=PYTEST_ADDOPTS" in overrides and "env_run_base.pass_env+=SPEC_OPTS" in overrides


def test_tox_gets_the_variables_in_each_env_of_its_tox_ini(tmp_path):
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py311, lint\n[testenv]\ncommands = pytest\n"
                                      "[testenv:lint]\npass_env = HOME\n[testenv:py3{11,12}-x]\n")
    overrides = prepare(CheckCommand(run="tox"), tmp_path / "r", {}, tmp_path).env["TOX_OVERRIDE"].split(";")
    assert "testenv:lint.pass_env+=PYTEST_ADDOPTS" in overrides and "testenv:lint.pass_env+=NODE_OPTIONS" in overrides
    assert not any("{" in o for o in overrides)  # a generated name is left to the runs' count
    (tmp_path / "tox.ini").unlink()
    assert not any("testenv:" in o for o in prepare(CheckCommand(run="tox"), tmp_path, {}, tmp_path).env[
        "TOX_OVERRIDE"].split(";"))


def test_a_line_that_says_how_it_is_read_or_names_its_runner_is_no_wrapper(tmp_path):
    assert prepare(CheckCommand(run="make test", format="exit-code"), tmp_path, {}).env == {}
    assert prepare(CheckCommand(run="make lint", format="diagnostics"), tmp_path, {}).runner == ""
    own = prepare(CheckCommand(run="make test", junit="reports/*.xml"), tmp_path, {})
    assert own.reports == ["reports/*.xml"] and own.env == {}
    assert prepare(CheckCommand(run="python -m pytest -q"), tmp_path, {}).runner == "pytest"


def test_node_options_only_for_a_node_that_takes_reporters_there(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "node").write_text("#!/bin/sh\necho v18.12.0\n")
    (fake / "node").chmod(0o755)
    assert "NODE_OPTIONS" not in prepare(CheckCommand(run="make test"), tmp_path, {"PATH": str(fake)}).env
    assert "NODE_OPTIONS" not in prepare(CheckCommand(run="make test"), tmp_path, {"PATH": str(tmp_path)}).env
    (fake / "node").write_text("#!/bin/sh\necho v22.1.0\n")
    newer = tmp_path / "bin22"
    fake.rename(newer)
    assert "--test-reporter=spec" in prepare(CheckCommand(run="make test"), tmp_path, {"PATH": str(newer)}).env[
        "NODE_OPTIONS"]


def pytest_report(path: Path, cases: dict[str, str]) -> Path:
    body = "".join(f'<testcase classname="" file="t.py" name="{n}">'
                   + {"passed": "", "failed": '<failure message="x"/>', "skipped": "<skipped/>"}[o] + "</testcase>"
                   for n, o in cases.items())
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{body}</testsuite></testsuites>')
    return path


def test_a_test_failing_in_any_run_is_failing_and_run_if_any_run_ran_it(tmp_path):
    one = pytest_report(tmp_path / "0001-pytest-a.xml", {"a": "failed", "b": "passed", "c": "skipped"})
    two = pytest_report(tmp_path / "0002-pytest-b.xml", {"a": "passed", "b": "failed", "c": "passed"})
    report = wrapper.read(wrapper.runs([one, two], "1 failed, 1 passed in 0.1s\n1 failed, 2 passed in 0.1s\n"),
                          tmp_path)
    assert report.failing == ["t.py::a", "t.py::b"]  # a pass in the other run hides neither
    assert report.ran == ["t.py::a", "t.py::b", "t.py::c"] and report.skipped == []


@pytest.mark.parametrize("output, files, why", [
    ("1 failed in 0.1s\n======= 2 passed in 0.20s =======\n", 1, "pytest ran 2 time(s) behind it and left 1"),
    ("", 1, "pytest ran 0 time(s)"),  # -qq or a redirected output: the count is unknown
    ("1 failed in 0.1s\n", 0, "pytest ran 1 time(s) behind it and left 0"),  # a tox env that did not pass it
    ("1 failed in 0.1s\n3 examples, 1 failure\n", 1, "rspec ran 1 time(s) behind it and left 0"),
])
def test_more_runs_than_reports_is_judged_by_the_exit_code(tmp_path, output, files, why):
    reports = [pytest_report(tmp_path / f"000{i}-pytest-x.xml", {"a": "failed"}) for i in range(files)]
    assert why in (wrapper.incomplete(wrapper.runs(reports, output)) or "")


def test_one_report_per_run_is_complete(tmp_path):
    reports = [pytest_report(tmp_path / f"000{i}-pytest-x.xml", {"a": "failed"}) for i in range(2)]
    out = "x\n1 failed in 0.12s\n==== 1 failed, 1 warning in 75.20s (0:01:15) ====\nno tests ran in 0.01s\n"
    assert wrapper.incomplete(wrapper.runs(reports, out)) == "pytest ran 3 time(s) behind it and left 2 report(s)" \
        ": judged by its exit code, not by a report that may miss a run's failures"
    assert wrapper.incomplete(wrapper.runs(reports, "1 failed in 0.12s\n1 failed, 2 passed in 0.3s\n")) is None
    # other runners' summaries are not pytest's
    for line in ("Ran 3 tests in 0.001s", "Tests: 1 failed, 3 passed, 4 total", "3 examples, 1 failure",
                 "test result: FAILED. 1 passed; 1 failed; 0 ignored; finished in 0.00s"):
        assert wrapper.runs([], line)[0].runs == 0


@pytest.mark.parametrize("output, why", [
    ("make: *** No rule to make target 'tset'.  Stop.", "make: *** No rule to make target 'tset'."),
    ("make[1]: *** No rule to make target 'unit'.  Stop.\nmake: *** [Makefile:2: test] Error 2",
     "make[1]: *** No rule to make target 'unit'."),
    ("ROOT: HandledError| provided environments not found in configuration file:\ntset",
     "provided environments not found in configuration file: tset"),
    ("nox > Error while collecting sessions.\nnox > Sessions not found: tset", "Sessions not found: tset"),
    ("error: Justfile does not contain recipe `tset`.", "Justfile does not contain recipe `tset`."),
    ("error: justfile does not contain recipe `tset`\nDid you mean `test`?",  # just 1.59
     "justfile does not contain recipe `tset`"),
    ("error: no justfile found", "no justfile found"),
    ("Unknown environment: nosuchenv", "Unknown environment: nosuchenv"),  # hatch run nosuchenv:test
    ("No environments were selected", "No environments were selected"),  # hatch test -py 3.99
    ('npm error Missing script: "tset"\nnpm error\nnpm error Did you mean this?', 'Missing script: "tset"'),
    ('npm ERR! Missing script: "tset"', 'Missing script: "tset"'),  # npm before 10
    ("\u2009ERR_PNPM_NO_SCRIPT\u2009 Missing script: tset\n\nCommand \"tset\" not found.", "Missing script: tset"),
    ('yarn run v1.22.22\nerror Command "tset" not found.', 'Command "tset" not found.'),
    ('Usage Error: Couldn\'t find a script named "tset".', 'Couldn\'t find a script named "tset".'),  # yarn berry
    ("ERROR: usage: pytest [options] [file_or_dir] [file_or_dir] [...]\npytest: error: unrecognized arguments: --nope"
     "\nmake: *** [Makefile:2: test] Error 4", "pytest: error: unrecognized arguments: --nope"),
    ("ERROR: file or directory not found: tset\n", "ERROR: file or directory not found: tset"),
])
def test_a_wrapper_without_the_target_it_is_asked_for_cannot_run(output, why):
    assert wrapper.cannot_run(output) == why


def test_keeper_keeps_each_complete_version_of_a_rewritten_report_once(tmp_path):
    with wrapper.Keeper(tmp_path) as keeper:
        report = tmp_path / "pytest-${TOX_ENV_NAME}${NOX_CURRENT_SESSION}.xml"
        report.write_text("<testsuites><testsuite>")  # half written: not kept
        keeper.sweep()
        pytest_report(report, {"a": "failed"})
        keeper.sweep()
        keeper.sweep()  # the same version: once
        pytest_report(report, {"b": "passed"})
    kept = sorted((tmp_path / wrapper.KEPT).iterdir())
    assert [p.name for p in kept] == [f"0001-{report.name}", f"0002-{report.name}"]
    assert [list(junit.read([p]).cases) for p in kept] == [["t.py::a"], ["t.py::b"]]


FILES = {"test_a.py": "def test_ok():\n    pass\n\n\ndef test_bug():\n    assert 1 == 2\n",
         "more/test_b.py": "def test_b():\n    pass\n"}


def project(root: Path, extra: dict[str, str]) -> Path:
    for rel, text in {**FILES, **extra}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_running_pytest_twice_reads_both_runs(tmp_path):
    root = project(tmp_path, {"Makefile": f"test:\n\t{PYTEST} test_a.py; {PYTEST} more\n\n"
                                          f"quiet:\n\t{PYTEST} -q more; {PYTEST} -q test_a.py\n"})
    r = run_check(CheckCommand(run="make test"), root, timeout_s=120)
    assert r.runner == wrapper.RUNNER and r.kind == JUNIT and r.problem is None
    assert r.failing == ["test_a.py::test_bug"]  # the first run's failure, its report rewritten by the second
    assert r.ran == ["more/test_b.py::test_b", "test_a.py::test_bug", "test_a.py::test_ok"]
    # -qq (with PYTEST's -q) prints no summary: the runs cannot be counted, so no report is trusted
    quiet = run_check(CheckCommand(run="make quiet"), root, timeout_s=120)
    assert quiet.exit_code != 0 and quiet.kind == "" and quiet.failing is None
    assert "pytest ran 0 time(s)" in quiet.extra["wrapper"] and quiet.extra["wrapper"] in quiet.tail  # said why
    # a line that runs pytest twice itself is read the same way
    line = run_check(CheckCommand(run=f"{PYTEST} test_a.py; {PYTEST} more"), root, timeout_s=120)
    assert line.runner == wrapper.RUNNER and line.failing == ["test_a.py::test_bug"] and len(line.ran or []) == 3


@pytest.mark.skipif(shutil.which("nox", path=str(Path(PY).parent)) is None, reason="nox is not installed")
def test_nox_passes_the_environment_and_each_session_writes_its_own_report(tmp_path):
    noxfile = textwrap.dedent(f"""\
        import nox

        @nox.session(python=False)
        def first(session):
            session.run({PY!r}, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_a.py")

        @nox.session(python=False)
        def second(session):
            session.run({PY!r}, "-m", "pytest", "-q", "-p", "no:cacheprovider", "more")
    """)
    root = project(tmp_path, {"noxfile.py": noxfile})
    nox = shutil.which("nox", path=str(Path(PY).parent))
    r = run_check(CheckCommand(run=f"{nox} --no-color"), root, timeout_s=120)
    assert r.kind == JUNIT and r.failing == ["test_a.py::test_bug"] and len(r.ran or []) == 3
    assert run_check(CheckCommand(run=f"{nox} -s tset"), root, timeout_s=60).problem \
        == "Sessions not found: tset"


@pytest.mark.skipif(wrapper._node_version("") < wrapper.NODE_MIN, reason="node 20 or later is not installed")
def test_a_script_running_node_test_twice_keeps_both_reports_and_other_node_processes_run(tmp_path):
    files = {"t1/a.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                             "test('bug', () => assert.strictEqual(1, 2));\ntest('ok', () => {});\n",
             "t2/b.test.js": "const test = require('node:test');\ntest('b', () => {});\n",
             # a node process that runs no tests (a build step) is not stopped by the reporters
             "test.sh": "s=0\nnode --test t1/ || s=1\nnode --test t2/ || s=1\nnode -e 'console.log(6 * 7)' || s=1\n"
                        "exit $s\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    r = run_check(CheckCommand(run="sh test.sh"), tmp_path, timeout_s=120)
    assert r.runner == wrapper.RUNNER and r.kind == JUNIT and "\n42\n" in r.tail
    assert r.failing == ["t1/a.test.js::bug"] and r.ran == ["t1/a.test.js::bug", "t1/a.test.js::ok", "t2/b.test.js::b"]



def test_an_unreadable_report_behind_a_wrapper_is_judged_by_the_exit_code(tmp_path):
    # two runs at once writing one file leave a mix: not a report to trust, nor the config's mistake
    (tmp_path / "mix.sh").write_text(
        'd=$(dirname "$MIDDLE_RSPEC_JSON")\n'  # middle's temporary folder, where pytest's report goes
        "printf '<testsuites><testsuite><testcase name=\"a\"></testsuites>' > \"$d/pytest-x.xml\"\n"
        "echo '1 failed in 0.10s'\nexit 1\n")
    r = run_check(CheckCommand(run="sh mix.sh"), tmp_path, timeout_s=60)
    assert r.runner == wrapper.RUNNER and r.problem is None and r.kind == "" and r.failing is None
    assert "could not be read" in r.extra["wrapper"] and "judged by its exit code" in r.tail


def test_each_recipe_make_says_failed_is_a_failure_without_its_line_number():
    out = "\n".join(["make: [Makefile:2: test] Error 1 (ignored)", "make[1]: Entering directory '/x'",
                     "make[1]: *** [Makefile:5: unit] Error 1", "make[1]: *** [Makefile:7: lint] Error 3",
                     "make: *** [lint] Error 3", "make: *** Waiting for unfinished jobs....",
                     "make: *** No rule to make target 'tset'.  Stop.", "tests/x.py:3: Error 1"])
    assert wrapper.make_errors(out) == ["(make) test: Error 1 (ignored)", "(make) unit: Error 1",
                                        "(make) lint: Error 3", "(make) lint: Error 3"]


def _site_module():  # type: ignore[no-untyped-def]
    import importlib.util

    path = Path(wrapper.__file__).with_name("unittest_site.py")
    spec = importlib.util.spec_from_loader("middle_unittest_site_under_test", loader=None)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    exec(compile(path.read_text(encoding="utf-8").split("\ntry:\n    _pytest_runs_all()")[0], str(path), "exec"),
         module.__dict__)
    return module


@pytest.mark.parametrize(("argv", "runs"), [
    (["python", "-m", "unittest"], True), (["python", "-munittest", "-v"], True),
    (["python", "-W", "default", "-X", "dev", "-m", "unittest", "tests"], True),
    (["python", "/venv/bin/coverage", "run", "--include=x/*", "-m", "unittest"], True),
    (["python", "-m", "coverage", "run", "-m", "unittest"], True),
    (["python", "-m", "pytest", "-m", "unittest"], False),  # pytest's marker option, not python's
    (["python", "-c", "import x", "-m", "unittest"], False), (["python", "setup.py", "-m", "unittest"], False),
    (["python"], False)])
def test_middles_sitecustomize_knows_a_unittest_run_from_any_other_python(argv, runs):
    assert _site_module()._runs_unittest(argv) is runs


def test_unittest_behind_a_wrapper_writes_a_report_per_run_and_other_pythons_keep_their_sitecustomize(tmp_path):
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE'] = 'loaded'\n")
    (tmp_path / "test_a.py").write_text(textwrap.dedent("""\
        import os
        import unittest


        class A(unittest.TestCase):
            def test_own_site_still_loaded(self):
                self.assertEqual(os.environ.get("OWN_SITE"), "loaded")

            def test_fails(self):
                self.fail("known")
    """))
    # a script: the line itself names no runner
    (tmp_path / "test.sh").write_text(f"{PY} -m unittest; {PY} -c 'import os; print(os.environ[\"OWN_SITE\"])'; "
                                      f"{PY} -m unittest test_a.A.test_fails\n")
    r = run_check(CheckCommand(run="sh test.sh"), tmp_path, timeout_s=60, env={"PYTHONPATH": str(tmp_path / "own")})
    assert r.kind == JUNIT and r.runner == wrapper.RUNNER
    assert r.failing == ["test_a.A::test_fails"]
    assert r.ran == ["test_a.A::test_fails", "test_a.A::test_own_site_still_loaded"]  # both runs read
    assert "\nloaded\n" in r.tail


TOX = shutil.which("tox", path=str(Path(PY).parent)) or shutil.which("tox")
GO_TEST = ('package calc\n\nimport "testing"\n\nfunc TestKnownBug(t *testing.T) {\n\tif 1 != 2 {\n'
           '\t\tt.Fatal("known bug")\n\t}\n}\n\nfunc TestAdds(t *testing.T) {}\n')


@pytest.mark.skipif(TOX is None or shutil.which("go") is None,
                    reason="tox or go is not installed (the test extra has tox; .ci/run installs go)")
def test_go_test_under_tox_gets_goflags_and_lists_every_test(tmp_path):
    """tox passes on only the variables it is told to: GOFLAGS=-v reaches its env through TOX_OVERRIDE
    as the runners' report variables do, so go test lists the tests it ran, the failing one named."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (project / "calc_test.go").write_text(GO_TEST)
    # go's own variables, which a Go project's tox.ini passes on itself; middle's GOFLAGS is not among them
    (project / "tox.ini").write_text("[tox]\nenvlist = go\n[testenv]\nskip_install = true\nallowlist_externals = go\n"
                                     "pass_env = HOME, GOCACHE, GOPATH, GOMODCACHE, GOPROXY, GOTOOLCHAIN\n"
                                     "commands = go test ./...\n")
    env = {"GOPROXY": "off", "GOTOOLCHAIN": "local"}
    result = run_check(CheckCommand(run=f"{TOX} -q --workdir {tmp_path / 'toxwork'}"), project, timeout_s=120, env=env)
    assert not result.passed and result.problem is None, result.tail
    assert result.failing == ["example.com/calc::TestKnownBug"], (result.failing, result.tail)
    assert sorted(result.ran or []) == ["example.com/calc::TestAdds", "example.com/calc::TestKnownBug"], result.tail
