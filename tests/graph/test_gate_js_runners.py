"""The JavaScript test runners judged failure by failure with no configuration: `node --test`,
jest, vitest and mocha, each asked for its every test's outcome by middle itself
(orchestrator/checks/runners/javascript.py). Through the real graph, store, git worktrees and the real
runners (installed globally: `.ci/run` installs them; a test skips only when its runner is not
installed), on projects that need no `npm install`, each with one test already failing on the base.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap

import pytest
from test_gate_projects import assert_cannot_run, assert_failed, assert_no_worse, delete, run_ticket, write

CALC = "exports.VALUE = 1;\nexports.add = (a, b) => a + b;\n"
UPPER = "exports.VALUE = 1;\nexports.add = (a, b) => typeof a === 'string' ? (a + b).toUpperCase() : a + b;\n"
FIXED = "exports.VALUE = 2;\nexports.add = (a, b) => a + b;\n"


def needs(tool: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed (.ci/run installs it)")


# -- node --test: NODE_OPTIONS carries middle's reporter; two files with a same-named test --------

NODE_FILES = {
    "calc.js": CALC,
    "test/calc.test.js": textwrap.dedent("""\
        const { test, describe } = require('node:test');
        const assert = require('node:assert');
        const calc = require('../calc.js');

        test('known bug', () => { assert.strictEqual(calc.VALUE, 2); });
        describe('add', () => {
          test('two words', () => { assert.strictEqual(calc.add('two ', 'words'), 'two words'); });
          test('numbers', () => { assert.strictEqual(calc.add(1, 2), 3); });
        });
    """),
    "test/other.test.js": textwrap.dedent("""\
        const { test, describe } = require('node:test');
        const assert = require('node:assert');
        describe('add', () => { test('numbers', () => { assert.strictEqual(1 + 2, 3); }); });
    """),
}
NODE = "node --test test/"
needs_node = needs("node")


@needs_node
def test_node_test_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, NODE_FILES, [NODE], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["test/calc.test.js::add > two words"]
    assert r["final"]["already_failing"] == ["test/calc.test.js::known bug"]
    assert r["final"]["tests_run"] == 4  # the two files' "add > numbers" are two tests


@needs_node
def test_node_test_a_ticket_that_leaves_the_known_failure_is_no_worse_naming_it(tmp_path, monkeypatch):
    # the report's temporary folder with a space in it: NODE_OPTIONS quotes are not a shell's
    (tmp_path / "temp dir").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp dir"))
    r = run_ticket(tmp_path, NODE_FILES, [NODE], write("NOTES.md", "notes\n"))
    assert_no_worse(r, "test/calc.test.js::known bug")
    assert "✖ known bug" in r["final"]["tail"]  # the spec reporter still prints on stdout


@needs_node
def test_node_test_fixing_the_known_failure_passes(tmp_path):
    r = run_ticket(tmp_path, NODE_FILES, [NODE], write("calc.js", FIXED))
    assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed"


@needs_node
def test_node_test_deleting_or_skipping_the_failing_test_is_a_failure(tmp_path):
    known = "test('known bug', () => { assert.strictEqual(calc.VALUE, 2); });\n"
    without = NODE_FILES["test/calc.test.js"].replace(known, "")
    r = run_ticket(tmp_path / "deleted", NODE_FILES, [NODE], write("test/calc.test.js", without))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["test/calc.test.js::known bug (removed)"]
    skipped = NODE_FILES["test/calc.test.js"].replace("test('known bug',", "test.skip('known bug',")
    r = run_ticket(tmp_path / "skipped", NODE_FILES, [NODE], write("test/calc.test.js", skipped))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["test/calc.test.js::known bug (skipped)"]


@needs_node
def test_node_test_a_file_that_no_longer_loads_is_a_failure(tmp_path):
    r = run_ticket(tmp_path, NODE_FILES, [NODE], write("test/other.test.js", "this is ( not javascript\n"))
    assert_failed(r)
    assert "test/other.test.js::test/other.test.js" in r["final"]["new_failures"]


@needs_node
@pytest.mark.parametrize("files, command, why", [
    (NODE_FILES, "node --test no_such_dir/", "Could not find"),
    ({"calc.js": CALC}, "node --test", "names no tests"),
    ({"calc.js": CALC, "test/a.test.js": "this is ( not javascript\n"}, NODE, "collection or import error"),
])
def test_node_test_that_cannot_really_run_is_an_error_before_any_turn(tmp_path, files, command, why):
    assert_cannot_run(run_ticket(tmp_path, files, [command], write("calc.js", UPPER)), why)


@needs_node
def test_a_base_result_kept_by_an_older_middle_is_measured_again(tmp_path):
    """Middle before this read `node --test` by its exit code alone: its kept base result (failed,
    naming nothing) would make every ticket from that commit fail. It is measured again."""
    from graph_helpers import make_orchestrator

    from orchestrator.checks import spec
    from orchestrator.config.settings import Config
    from orchestrator.graph.checking import BASELINE_FORMAT
    from orchestrator.testing import make_repo
    from orchestrator.testing.fakes import RecordingCodingAgent, ScriptedAgentLLM, decision_reply, plan_reply
    from tickets.model import Ticket

    repo = make_repo(tmp_path / "repo", NODE_FILES)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    cfg = Config(root=tmp_path, state_dir=str(tmp_path / "state"), agent={"max_turns": 4, "max_cost_usd": 1.0},
                 memory={"backend": "none"}, check={"commands": [NODE], "max_rounds": 0, "timeout_s": 120})
    llm = ScriptedAgentLLM([plan_reply("Do the ticket"), decision_reply(True, "Done.")])
    with make_orchestrator(cfg, llm, RecordingCodingAgent([lambda p, cwd: write("NOTES.md", "x\n")(cwd) or "Done."])
                           ) as orch:
        old = {"command": NODE, "exit_code": 1, "duration_s": 0.5, "tail": "✖ known bug", "kind": "",
               "failing": None, "format": 3}
        assert orch.store.put_check_baseline(head, spec.key(NODE), old)
        orch.store.upsert_ticket(Ticket(id="t1", project_id="p", title="Notes", project_path=str(repo)))
        outcome = orch.run_ticket("t1")
        assert outcome.status == "complete", outcome.reason
        assert orch.store.latest_run("t1")["check_status"] == "no-worse"
        assert orch.store.check_baseline(head, spec.key(NODE))["format"] == BASELINE_FORMAT


# -- jest (global): `--json --outputFile` appended after the word jest ---------------------------

JEST_TEST = textwrap.dedent("""\
    const calc = require('./calc.js');

    test('known bug', () => { expect(calc.VALUE).toBe(2); });
    describe('add', () => {
      test('two words', () => { expect(calc.add('two ', 'words')).toBe('two words'); });
      test('numbers', () => { expect(calc.add(1, 2)).toBe(3); });
    });
""")
JEST_FILES = {"package.json": '{"name": "calc", "private": true, "scripts": {"test": "jest"}}\n',
              "calc.js": CALC, "calc.test.js": JEST_TEST}
JEST = "jest --ci"
needs_jest = needs("jest")


@needs_jest
def test_jest_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, JEST_FILES, [JEST], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["calc.test.js::add > two words"]
    assert r["final"]["already_failing"] == ["calc.test.js::known bug"]


@needs_jest
def test_jest_a_ticket_that_leaves_the_known_failure_is_no_worse_naming_it(tmp_path):
    r = run_ticket(tmp_path, JEST_FILES, [JEST], write("NOTES.md", "notes\n"))
    assert_no_worse(r, "calc.test.js::known bug")
    assert r["final"]["tests_run"] == 3 and "Tests:" in r["final"]["tail"]


@needs_jest
def test_jest_deleting_or_skipping_the_failing_test_is_a_failure(tmp_path):
    known = "test('known bug', () => { expect(calc.VALUE).toBe(2); });\n"
    r = run_ticket(tmp_path / "deleted", JEST_FILES, [JEST], write("calc.test.js", JEST_TEST.replace(known, "")))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["calc.test.js::known bug (removed)"]
    r = run_ticket(tmp_path / "skipped", JEST_FILES, [JEST],
                   write("calc.test.js", JEST_TEST.replace("test('known bug'", "test.skip('known bug'")))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["calc.test.js::known bug (skipped)"]


@needs_jest
@pytest.mark.parametrize("files, command, why", [
    (JEST_FILES, "jest --ci no_such_test_file", "No tests found"),
    ({**JEST_FILES, "calc.test.js": "require('./not_there.js');\ntest('a', () => {});\n"}, JEST,
     "collection or import error"),
])
def test_jest_that_cannot_really_run_is_an_error_before_any_turn(tmp_path, files, command, why):
    r = run_ticket(tmp_path, files, [command], write("calc.js", UPPER))
    assert_cannot_run(r, why)


# -- vitest (global, its globals on): the JSON reporter beside the default one --------------------

VITEST_FILES = {"package.json": '{"name": "calc", "private": true, "scripts": {"test": "vitest run"}}\n',
                "vitest.config.mjs": "export default { test: { globals: true } };\n",
                "calc.js": CALC, "calc.test.js": JEST_TEST}
VITEST = "vitest run"
needs_vitest = needs("vitest")


@needs_vitest
def test_vitest_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, VITEST_FILES, [VITEST], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["calc.test.js::add > two words"]
    assert r["final"]["already_failing"] == ["calc.test.js::known bug"]


@needs_vitest
def test_vitest_a_ticket_that_leaves_the_known_failure_is_no_worse_naming_it(tmp_path):
    r = run_ticket(tmp_path, VITEST_FILES, [VITEST], write("NOTES.md", "notes\n"))
    assert_no_worse(r, "calc.test.js::known bug")
    assert r["final"]["tests_run"] == 3


@needs_vitest
def test_vitest_deleting_the_failing_test_is_a_failure(tmp_path):
    known = "test('known bug', () => { expect(calc.VALUE).toBe(2); });\n"
    r = run_ticket(tmp_path, VITEST_FILES, [VITEST], write("calc.test.js", JEST_TEST.replace(known, "")))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["calc.test.js::known bug (removed)"]


@needs_vitest
@pytest.mark.parametrize("colour", [{}, {"CI": "true"}, {"FORCE_COLOR": "1"}], ids=["plain", "ci", "force-colour"])
def test_vitest_that_finds_no_tests_is_an_error_before_any_turn(tmp_path, monkeypatch, colour):
    # Under CI=true (as CI runs) or FORCE_COLOR vitest colours its lines: read all the same.
    for name in ("CI", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in colour.items():
        monkeypatch.setenv(name, value)
    r = run_ticket(tmp_path, VITEST_FILES, ["vitest run no_such_test_file"], write("calc.js", UPPER))
    assert_cannot_run(r, "No test files found")


# -- mocha (global): middle's reporter, spec's output and a JUnit report ---------------------------

MOCHA_TEST = textwrap.dedent("""\
    const assert = require('node:assert');
    const calc = require('../calc.js');

    it('known bug', () => { assert.strictEqual(calc.VALUE, 2); });
    describe('add', () => {
      it('two words', () => { assert.strictEqual(calc.add('two ', 'words'), 'two words'); });
      it('numbers', () => { assert.strictEqual(calc.add(1, 2), 3); });
    });
""")
MOCHA_FILES = {"calc.js": CALC, "test/calc.test.js": MOCHA_TEST}
MOCHA = "mocha"
needs_mocha = needs("mocha")


@needs_mocha
def test_mocha_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, MOCHA_FILES, [MOCHA], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["test/calc.test.js::add > two words"]
    assert r["final"]["already_failing"] == ["test/calc.test.js::known bug"]


@needs_mocha
def test_mocha_a_ticket_that_leaves_the_known_failure_is_no_worse_naming_it(tmp_path):
    r = run_ticket(tmp_path, MOCHA_FILES, [MOCHA], write("NOTES.md", "notes\n"))
    assert_no_worse(r, "test/calc.test.js::known bug")
    assert r["final"]["tests_run"] == 3 and "1 failing" in r["final"]["tail"]  # spec's output kept


@needs_mocha
def test_mocha_deleting_the_failing_test_is_a_failure(tmp_path):
    known = "it('known bug', () => { assert.strictEqual(calc.VALUE, 2); });\n"
    r = run_ticket(tmp_path, MOCHA_FILES, [MOCHA], write("test/calc.test.js", MOCHA_TEST.replace(known, "")))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["test/calc.test.js::known bug (removed)"]


@needs_mocha
def test_mocha_deleting_every_test_file_is_a_failure_not_a_pass(tmp_path):
    r = run_ticket(tmp_path, MOCHA_FILES, [MOCHA], delete("test/calc.test.js"))
    assert_failed(r)
    assert "could not run" in r["final"]["reason"] and "No test files found" in r["final"]["reason"]


@needs_mocha
def test_mocha_that_finds_no_tests_is_an_error_before_any_turn(tmp_path):
    r = run_ticket(tmp_path, MOCHA_FILES, ["mocha no_such_test_file.js"], write("calc.js", UPPER))
    assert_cannot_run(r, "No test files found")


# -- `npm test` (what `middle init` suggests): the script's runner is asked, the script untouched --

def with_script(files: dict[str, str], script: str) -> dict[str, str]:
    return {**files, "package.json": '{"name": "calc", "private": true, "scripts": {"test": %s}}\n'
            % __import__("json").dumps(script)}


@needs("npm")
@pytest.mark.parametrize("runner, files, script, known", [
    ("node", NODE_FILES, "node --test test/", "test/calc.test.js::known bug"),
    ("jest", JEST_FILES, "jest --ci", "calc.test.js::known bug"),
    ("vitest", VITEST_FILES, "vitest run", "calc.test.js::known bug"),
    ("mocha", MOCHA_FILES, "mocha", "test/calc.test.js::known bug"),
])
def test_npm_test_is_judged_by_its_scripts_runner(tmp_path, runner, files, script, known):
    if shutil.which(runner) is None:
        pytest.skip(f"{runner} is not installed (.ci/run installs it)")
    project = with_script(files, script)
    r = run_ticket(tmp_path / "same", project, ["npm test"], write("NOTES.md", "notes\n"))
    assert_no_worse(r, known)
    r = run_ticket(tmp_path / "worse", project, ["npm test"], write("calc.js", UPPER))
    assert_failed(r)
    assert [f.split("::")[1] for f in r["final"]["new_failures"]] == ["add > two words"]


@needs("npm")
@needs_jest
def test_npm_test_whose_script_runs_more_than_the_runner_is_read_as_a_wrapper(tmp_path):
    """Options after `--` would reach `echo`, not jest: the script is a wrapper, and jest's own
    command line gains its report options inside it (wrapper.py, jest_argv.cjs)."""
    project = with_script(JEST_FILES, "jest --ci && echo linted")
    r = run_ticket(tmp_path / "same", project, ["npm test"], write("NOTES.md", "notes\n"))
    assert_no_worse(r, "calc.test.js::known bug")
    r = run_ticket(tmp_path / "worse", project, ["npm test"], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["calc.test.js::add > two words"]


# -- `pnpm test` and `yarn test`: the script's runner asked as under npm, the options with no `--` --

@pytest.mark.parametrize("manager, line", [("pnpm", "pnpm test"), ("yarn", "yarn run test")])
def test_pnpm_and_yarn_test_are_judged_by_the_scripts_runner(tmp_path, manager, line):
    for tool in (manager, "jest"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (.ci/run installs it)")
    r = run_ticket(tmp_path / "same", JEST_FILES, [line], write("NOTES.md", "notes\n"))
    assert_no_worse(r, "calc.test.js::known bug")
    r = run_ticket(tmp_path / "worse", JEST_FILES, [line], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["calc.test.js::add > two words"]


@pytest.mark.parametrize("line", ["pnpm test", "yarn test"])
def test_pnpm_and_yarn_test_whose_runner_finds_no_tests_cannot_run(tmp_path, line):
    manager = line.split()[0]
    for tool in (manager, "jest"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (.ci/run installs it)")
    r = run_ticket(tmp_path, with_script(JEST_FILES, "jest --ci no_such_test_file"), [line], write("calc.js", UPPER))
    assert_cannot_run(r, "No tests found")


# -- yargs-parser's `npm test`: `c8 --reporter=text --reporter=html mocha test/*.mjs`, a coverage
# tool whose own `--reporter` options come before mocha; `cov.js` stands in for c8 (it runs the
# command after its own options, as c8 does) --------------------------------------------------

COV = textwrap.dedent("""\
    const { spawnSync } = require('node:child_process');
    const args = process.argv.slice(2);
    while (args.length && args[0].startsWith('--')) args.shift();  // its own options, up to the command
    const run = spawnSync(args[0], args.slice(1), { stdio: 'inherit', shell: true });
    process.exit(run.status === null ? 1 : run.status);
""")
COVERED_MOCHA = {**with_script(MOCHA_FILES, "node cov.js --reporter=text --reporter=html mocha test/"),
                 "cov.js": COV}


@needs("npm")
@needs_mocha
def test_npm_test_running_mocha_under_a_coverage_tool_with_its_own_reporters_is_read_per_test(tmp_path):
    r = run_ticket(tmp_path, COVERED_MOCHA, ["npm test"], write("calc.js", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["test/calc.test.js::add > two words"]
    fine = run_ticket(tmp_path / "fine", COVERED_MOCHA, ["npm test"], write("NOTES.md", "notes\n"))
    assert_no_worse(fine, "test/calc.test.js::known bug")


@needs("npm")
@pytest.mark.parametrize("line", ["npm run tset", "pnpm run tset", "yarn tset"])
def test_a_package_script_that_does_not_exist_cannot_run(tmp_path, line):
    if shutil.which(line.split()[0]) is None:
        pytest.skip(f"{line.split()[0]} is not installed")
    r = run_ticket(tmp_path, with_script(MOCHA_FILES, "mocha"), [line], write("calc.js", UPPER))
    assert_cannot_run(r, "tset")
