"""A check that stops at its first failure (`pytest -x`, `--maxfail`, `addopts = "-x"`, `python -m
unittest -f`) on a base that already fails one test: both runs stopped there, so a test the
ticket broke after it never ran, and the ticket read as "no worse". Each run now goes on past
its failures (runners/pytest_runall.py, unittest_junit.py), directly and behind make, through the
real graph, store, git worktrees and runners (as tests/graph/test_gate_projects.py).
"""

from __future__ import annotations

import shutil
import textwrap

import pytest
import test_gate_projects as gate

PY = gate.PY
TEST_CALC = textwrap.dedent("""\
    import calc


    def test_a_known_bug():  # already failing on the base; runs first
        assert calc.VALUE == 2


    def test_b_add():
        assert calc.add(1, 2) == 3
""")
FILES = {"calc.py": "VALUE = 1\n\n\ndef add(a, b):\n    return a + b\n", "test_calc.py": TEST_CALC}
BREAK_ADD = gate.write("calc.py", "VALUE = 1\n\n\ndef add(a, b):\n    return a * b\n")
KNOWN, BROKEN = "test_calc.py::test_a_known_bug", "test_calc.py::test_b_add"


@pytest.mark.parametrize("line, extra", [
    (f"{PY} -m pytest -x -q -p no:cacheprovider", {}),
    (f"{PY} -m pytest --maxfail=1 -q -p no:cacheprovider", {}),
    (f"{PY} -m pytest -q -p no:cacheprovider", {"pytest.ini": "[pytest]\naddopts = -x\n"}),
], ids=["-x", "--maxfail=1", "addopts -x"])
def test_pytest_stopping_at_the_base_failure_still_sees_the_test_the_ticket_breaks(tmp_path, line, extra):
    r = gate.run_ticket(tmp_path, {**FILES, **extra}, [line], BREAK_ADD)
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == [BROKEN] and r["final"]["already_failing"] == [KNOWN]


def test_pytest_x_a_harmless_ticket_is_still_no_worse(tmp_path):
    r = gate.run_ticket(tmp_path, FILES, [f"{PY} -m pytest -x -q -p no:cacheprovider"], gate.write("N.md", "x\n"))
    gate.assert_no_worse(r, KNOWN)
    assert r["final"]["tests_run"] == 2


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed (apt-get install make)")
def test_pytest_x_behind_make_sees_it_too(tmp_path):
    files = {**FILES, "Makefile": f".PHONY: test\ntest:\n\t{PY} -m pytest -x -q -p no:cacheprovider\n"}
    r = gate.run_ticket(tmp_path, files, ["make test"], BREAK_ADD)
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == [BROKEN] and KNOWN in r["final"]["already_failing"]


UNITTEST = textwrap.dedent("""\
    import unittest

    import calc


    class TestCalc(unittest.TestCase):
        def test_a_known_bug(self):
            self.assertEqual(calc.VALUE, 2)

        def test_b_add(self):
            self.assertEqual(calc.add(1, 2), 3)
""")


def test_unittest_failfast_still_sees_the_test_the_ticket_breaks(tmp_path):
    files = {"calc.py": FILES["calc.py"], "test_calc.py": UNITTEST}
    r = gate.run_ticket(tmp_path, files, [f"{PY} -m unittest -f test_calc"], BREAK_ADD)
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["test_calc.TestCalc::test_b_add"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed (apt-get install make)")
def test_unittest_failfast_behind_make_sees_it_too(tmp_path):
    files = {"calc.py": FILES["calc.py"], "test_calc.py": UNITTEST,
             "Makefile": f".PHONY: test\ntest:\n\t{PY} -m unittest -f -v test_calc\n"}
    r = gate.run_ticket(tmp_path, files, ["make test"], BREAK_ADD)
    gate.assert_failed(r)
    assert "test_calc.TestCalc::test_b_add" in r["final"]["new_failures"]


# -- the JavaScript runners' `--bail` (bail.py): in the line, in a config file, through npm test ---

JS_CALC = "exports.VALUE = 1;\nexports.add = (a, b) => a + b;\n"
JS_BREAK_ADD = gate.write("calc.js", "exports.VALUE = 1;\nexports.add = (a, b) => a * b;\n")
# the known failure in a file of its own, named and sized to run first (jest runs big files first)
KNOWN_JS = ("const calc = require('./calc.js');\n// " + "the base's known bug. " * 40 + "\n"
            "test('a known bug', () => { expect(calc.VALUE).toBe(2); });\n")
ADD_JS = "const calc = require('./calc.js');\ntest('adds', () => { expect(calc.add(1, 2)).toBe(3); });\n"
JEST_SCRIPT = "jest --ci --bail --runInBand"
JEST_FILES = {"package.json": '{"name": "calc", "private": true, "scripts": {"test": "%s"}}\n' % JEST_SCRIPT,
              "calc.js": JS_CALC, "a_known.test.js": KNOWN_JS, "b_add.test.js": ADD_JS}


def needs(tool: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed (.ci/run installs it)")


@needs("jest")
@pytest.mark.parametrize("line", ["jest --ci --bail --runInBand", "npm test"])
def test_jest_bail_still_sees_the_test_the_ticket_breaks(tmp_path, line):
    r = gate.run_ticket(tmp_path, JEST_FILES, [line], JS_BREAK_ADD)
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["b_add.test.js::adds"]
    assert r["final"]["already_failing"] == ["a_known.test.js::a known bug"]


MOCHA_TEST = ("const assert = require('assert');\nconst calc = require('../calc.js');\n"
              "it('a known bug', () => { assert.strictEqual(calc.VALUE, 2); });\n"
              "it('adds', () => { assert.strictEqual(calc.add(1, 2), 3); });\n")


@needs("mocha")
@pytest.mark.parametrize("line, extra", [("mocha --bail test", {}),
                                         ("mocha test", {".mocharc.json": '{"bail": true}\n'})],
                         ids=["line", ".mocharc"])
def test_mocha_bail_still_sees_the_test_the_ticket_breaks(tmp_path, line, extra):
    files = {"calc.js": JS_CALC, "test/calc.spec.js": MOCHA_TEST, **extra}
    r = gate.run_ticket(tmp_path, files, [line], JS_BREAK_ADD)
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["adds"] or r["final"]["new_failures"][0].endswith("adds")


@needs("vitest")
@pytest.mark.parametrize("line, config", [("vitest run --bail 1", "{ globals: true }"),
                                          ("vitest run", "{ globals: true, bail: 1 }")], ids=["line", "config"])
def test_vitest_bail_still_sees_the_test_the_ticket_breaks(tmp_path, line, config):
    files = {"package.json": '{"name": "calc", "private": true}\n', "calc.js": JS_CALC,
             "vitest.config.mjs": f"export default {{ test: {config} }};\n",
             "a_known.test.js": KNOWN_JS, "b_add.test.js": ADD_JS}
    r = gate.run_ticket(tmp_path, files, [line], JS_BREAK_ADD)
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["b_add.test.js::adds"]


# -- go test -failfast: taken out of go test's own command ----------------------------------------


@needs("go")
def test_go_failfast_still_sees_the_test_the_ticket_breaks(tmp_path, monkeypatch):
    import test_gate_native as native

    for name, value in (("GOPROXY", "off"), ("GOFLAGS", "-mod=mod"), ("GOTOOLCHAIN", "local")):
        monkeypatch.setenv(name, value)  # offline, as test_gate_native's go_env
    r = gate.run_ticket(tmp_path, native.GO_FILES, ["go test -failfast ./..."],
                        gate.write("calc.go", native.CALC_GO.replace("a + b", "a * b")))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["example.com/m::TestAdd", "example.com/m::TestAdd/two_words"]
    assert r["final"]["already_failing"] == [native.KNOWN_GO]
