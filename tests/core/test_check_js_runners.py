"""Which JavaScript runner a check line runs, how middle asks it for its report, and how jest's
JSON is read (orchestrator/checks/runners/javascript.py and its modules); the runners themselves run in
tests/graph/test_gate_js_runners.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.checks import junit
from orchestrator.checks.instrument import prepare, runner_of
from orchestrator.checks.runner import run_check
from orchestrator.checks.runners import javascript, jest
from orchestrator.config.settings import CheckCommand


@pytest.mark.parametrize("line, runner", [
    ("node --test", "node-test"), ("node --test test/", "node-test"),
    ("node --experimental-vm-modules --test", "node-test"), ("cd web && node --test", "node-test"),
    ("node --test --test-reporter=tap", ""),  # its own reporter: Node refuses a second set
    ("jest", "jest"), ("npx jest --ci", "jest"), ("node_modules/.bin/jest -i", "jest"),
    ("npx jest --reporters=jest-junit", "jest"), ("echo jest-junit", ""), ("jest.sh", ""),
    ("jest --json --outputFile=r.json", ""), ("vitest run", "vitest"), ("npx vitest --run", "vitest"),
    ("vitest run --reporter=junit --outputFile=junit.xml", ""),
    ("mocha", "mocha"), ("npx mocha 'test/**/*.js'", "mocha"), ("mocha --reporter dot", ""), ("mocha -R tap", ""),
    ("npm test", ""), ("node server.js", ""), ("python -m pytest", "pytest"),
])
def test_runner_detection(line, runner):
    assert runner_of(line) == runner


def test_the_report_options_go_right_after_the_runners_word(tmp_path):
    p = prepare(CheckCommand(run="npx jest --ci && npm run lint"), tmp_path, {})
    asked = f"--json --testLocationInResults --outputFile={tmp_path}/jest.json --bail=0"
    assert p.line == f"npx jest {asked} --ci && npm run lint"
    p = prepare(CheckCommand(run="vitest run"), tmp_path, {})
    assert p.line.startswith("vitest --reporter=default --reporter=json --outputFile.json=") and p.line.endswith(" run")
    # every test runs: the runner's own `--bail` is taken out of its command (not another's)
    p = prepare(CheckCommand(run="npx jest --bail 2 src && eslint --bail x"), tmp_path, {})
    assert p.line == f"npx jest {asked}  src && eslint --bail x"
    assert " -b" not in prepare(CheckCommand(run="mocha -b test"), tmp_path, {}).line
    assert prepare(CheckCommand(run="vitest run --bail=3 x"), tmp_path, {}).line.count("--bail") == 1
    p = prepare(CheckCommand(run="node --test"), tmp_path, {"NODE_OPTIONS": "--max-old-space-size=512"})
    assert p.line == "node --test" and p.env["NODE_OPTIONS"].startswith("--max-old-space-size=512 --test-reporter=spec")
    # a command that names its own report is read there, as configured
    assert prepare(CheckCommand(run="npx jest", junit="junit.xml"), tmp_path, {}).line == "npx jest"


@pytest.mark.parametrize("script, line, runner", [
    ("jest --ci", "npm test", "jest"), ("mocha", "npm run test", "mocha"), ("vitest run", "npm t", "vitest"),
    ("node --test && eslint .", "npm test", "node-test"),  # NODE_OPTIONS reaches it anywhere
    ("jest && eslint .", "npm test", ""),  # options after `--` would go to eslint
    ("jest", "npm test -- --ci", ""), ("eslint .", "npm test", ""),
    ("jest", "pnpm test", "jest"), ("jest", "pnpm run test", "jest"), ("mocha", "pnpm t", "mocha"),
    ("vitest run", "yarn test", "vitest"), ("jest", "yarn run test && yarn lint", "jest"),
    ("jest", "pnpm test -- --ci", ""), ("jest", "yarn test --ci", ""), ("jest", "yarn t", ""),  # not yarn's
    ("jest", "pnpm testing", ""),
])
def test_npm_test_is_read_through_its_script(tmp_path, script, line, runner):
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": script}}))
    assert javascript.script_runner(line, tmp_path) == runner


def test_npm_test_gets_the_options_after_a_double_dash_and_a_bad_package_json_is_no_guess(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest"}}))
    p = prepare(CheckCommand(run="npm test && npm run lint"), tmp_path / "r", {}, tmp_path)
    assert p.runner == "jest" and p.line.endswith(" lint")
    assert p.line.startswith("npm test -- --json --testLocationInResults --outputFile=")
    (tmp_path / "package.json").write_text("[not json")
    # no runner known: a wrapper like any other (only the runners the environment asks are read)
    assert prepare(CheckCommand(run="npm test"), tmp_path, {}, tmp_path).runner == "wrapper"


@pytest.mark.parametrize("line, asked", [
    ("pnpm test", "pnpm test --json"), ("pnpm run test && pnpm lint", "pnpm run test --json"),
    ("yarn test", "yarn test --json"), ("yarn run test", "yarn run test --json"),
])
def test_pnpm_and_yarn_pass_the_options_on_without_a_double_dash(tmp_path, line, asked):
    """pnpm 7+ hands a `--` to the script as it is (jest would take the options after it for test
    paths); yarn 1 drops it with a warning; both pass what follows the script's name on."""
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest"}}))
    p = prepare(CheckCommand(run=line), tmp_path / "r", {}, tmp_path)
    assert p.runner == "jest" and " -- " not in p.line
    assert p.line.startswith(f"{asked} --testLocationInResults --outputFile=")


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_jest_json_identities_relative_files_collection_errors_and_repeats(tmp_path):
    report = write(tmp_path / "r.json", {"testResults": [
        {"name": str(tmp_path / "src/a.test.js"), "status": "failed", "assertionResults": [
            {"ancestorTitles": ["", "add"], "title": "two words", "status": "failed",
             "failureMessages": ["boom\nat x"]},
            {"ancestorTitles": ["add"], "title": "two words", "status": "passed"},
            {"ancestorTitles": [], "title": "later", "status": "todo"}]},
        {"name": str(tmp_path / "b.test.js"), "status": "failed", "message": "SyntaxError: nope\n  at y",
         "assertionResults": []}]})
    read = jest.read([report], tmp_path)
    assert read.failing == ["b.test.js::(the file)", "src/a.test.js::add > two words"]
    assert read.ran == ["src/a.test.js::add > two words", "src/a.test.js::add > two words (2)"]
    assert read.skipped == ["src/a.test.js::later"]
    assert read.cases["src/a.test.js::add > two words"].message == "boom"
    assert read.cases["b.test.js::(the file)"].collection


@pytest.mark.parametrize("text, says", [("{not json", "is not a JSON test report"), ("[]", "no testResults list")])
def test_a_report_that_is_not_jests_json_is_a_report_error(tmp_path, text, says):
    (tmp_path / "r.json").write_text(text)
    with pytest.raises(junit.ReportError, match=says):
        jest.read([tmp_path / "r.json"], tmp_path)


@pytest.mark.parametrize("runner, output, says", [
    ("jest", "No tests found, exiting with code 1\nRun with `--passWithNoTests`", "jest: No tests found"),
    ("jest", "● Unrecognized CLI Parameter:\n\n  Unrecognized option \"nosuch\".", "Unrecognized CLI Parameter"),
    ("jest", "Error: Could not find a config file based on provided values:\npath: \"/w\"", "a config file"),
    ("vitest", "\nNo test files found, exiting with code 1\n", "vitest: No test files found"),
    ("mocha", "\x1b[31mError: No test files found: \"x.js\"\x1b[39m\n", 'mocha: Error: No test files found: "x.js"'),
    ("node-test", "Could not find '/w/no_such_dir/'\n", "node --test: Could not find"),
])
def test_each_runners_own_words_for_a_run_that_cannot_run(runner, output, says):
    assert says in (javascript.cannot_run(runner, 1, output) or "")
    assert javascript.cannot_run(runner, 1, "1 failing\n") is None


@pytest.mark.skipif(shutil.which("jest") is None, reason="jest is not installed (.ci/run installs it)")
def test_jest_randomize_keeps_same_named_tests_ids(tmp_path):
    """`jest --randomize` runs a file's tests, and lists them in its report, in another order on each
    seed: same-named tests are numbered in the order of their lines (--testLocationInResults), so
    the failing one has one id whatever the seed (else base and ticket would swap them)."""
    (tmp_path / "package.json").write_text('{"name": "x", "private": true}\n')
    (tmp_path / "a.test.js").write_text("".join(f"test('adds', () => {{ expect({n}).toBe({0 if n == 3 else n}); }});\n"
                                                for n in range(1, 7)))
    seen = set()
    for seed in (1, 2, 3):
        r = run_check(f"jest --ci --randomize --seed={seed}", tmp_path, timeout_s=60)
        assert r.problem is None and r.ran is not None and len(r.ran) == 6, r.tail
        seen.add(tuple(r.failing or []))
    assert seen == {("a.test.js::adds (3)",)}
