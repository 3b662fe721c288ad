"""The check gate enumerated: every runner format middle reads, directly and behind a wrapper of its
family, and a command no reader understands, each on a base that ALREADY FAILS one test ("known
bug"), against five tickets:

- (a) harmless: no worse, the note naming the base's failure;
- (b) breaks another test ("adds"): failed, naming it;
- (c) deletes the failing test, or skips it: failed, saying it was removed or skipped (a passing
  run that dropped a test the base ran is not a pass);
- (d) fixes the base's failure: passed;
- (e) makes the run crash before any test (a syntax error in the code every test loads): failed.

A guarantee is only as good as the paths it is tested on, so each row is one path a real project
takes (`make test` in front of unittest, `npm test` in front of jest, `rake spec`...). The verdict
layer is used directly (the real runners in real folders, `run_check` then `judge`), base once per
row; the graph adds nothing to a verdict, and one scenario per runner family goes through the real
graph on the offline model at the end. A row whose runner is not installed is skipped, saying so
(`.ci/run` installs every one of them). Where the product knowingly reads a command by its exit code
alone, the row says what that costs (`LEAKS`): those cells are the documented limits of
docs/checks.md, asserted as they are so that a change to them is seen.
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchestrator.checks.runner import CheckResult, run_check
from orchestrator.checks.verdict import FAILED, NO_WORSE, PASSED, UNDECIDED, Verdict, judge
from orchestrator.config.settings import CheckCommand

PY = sys.executable
Edit = Callable[[Path], None]
SCENARIOS = ("harmless", "breaks", "removes", "skips", "fixes", "crashes")


@dataclass(frozen=True)
class Row:
    """One runner on one path: its project (one failing test), its command, its five edits."""

    name: str
    command: str
    files: dict[str, str]
    edits: dict[str, dict[str, str | None]]  # scenario -> {path: new text, or None to delete}
    tools: tuple[str, ...] = ()
    # scenario -> the outcome expected where it is not the promise's (a command read by exit code)
    leaks: dict[str, str] = field(default_factory=dict)
    baseline: str = "per-failure"
    env: dict[str, str] = field(default_factory=dict)
    # packages linked into the project's node_modules from the global one the row's first tool is in
    # (uvu's test files import it, and `-r esm` only loads for a package that depends on it)
    packages: tuple[str, ...] = ()
    format: str = "auto"
    junit: str | None = None
    # behind a wrapper: the runners whose tests its base run is read from (asserted on the base, so
    # the row's claim in the enumeration, test_every_runner_middle_reads_has_its_rows, is true)
    behind: tuple[str, ...] = ()

    def spec(self) -> CheckCommand:
        return CheckCommand(run=self.command, baseline=self.baseline, format=self.format,  # type: ignore[arg-type]
                            junit=self.junit)


# -- Python: one module, one test file unittest and pytest both run ------------------------------

PY_CALC = "VALUE = 1\n\n\ndef add(a, b):\n    return a + b\n"
PY_KNOWN = "    def test_known_bug(self):\n        self.assertEqual(calc.VALUE, 2)\n\n"
PY_TEST = ("import unittest\n\nimport calc\n\n\nclass TestCalc(unittest.TestCase):\n" + PY_KNOWN
           + "    def test_adds(self):\n        self.assertEqual(calc.add(1, 2), 3)\n")
PY_FILES = {"calc.py": PY_CALC, "test_calc.py": PY_TEST}
PY_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"calc.py": PY_CALC.replace("a + b", "a * b")},
    "removes": {"test_calc.py": PY_TEST.replace(PY_KNOWN, "")},
    "skips": {"test_calc.py": PY_TEST.replace(PY_KNOWN, "    @unittest.skip('later')\n" + PY_KNOWN)},
    "fixes": {"calc.py": PY_CALC.replace("VALUE = 1", "VALUE = 2")},
    "crashes": {"calc.py": "def add(:\n"},
}
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
UNITTEST = f"{PY} -m unittest -v"

# -- JavaScript: calc.js and one test file per runner's style ------------------------------------

JS_CALC = "exports.VALUE = 1;\nexports.add = (a, b) => a + b;\n"
JS_KNOWN = "test('known bug', () => { assert.strictEqual(calc.VALUE, 2); });\n"
JS_BODY = JS_KNOWN + "test('adds', () => { assert.strictEqual(calc.add(1, 2), 3); });\n"
NODE_TEST = ("const { test } = require('node:test');\nconst assert = require('node:assert');\n"
             "const calc = require('../calc.js');\n\n" + JS_BODY)
JEST_TEST = "const assert = require('node:assert');\nconst calc = require('../calc.js');\n\n" + JS_BODY
MOCHA_TEST = JEST_TEST.replace("test(", "it(")


def js(test: str, *, script: str = "", extra: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, Any]]:
    files = {"calc.js": JS_CALC, "test/calc.test.js": test, **(extra or {})}
    # jest wants a package.json (its root); npm test its script
    files["package.json"] = '{"name": "calc", "private": true, "scripts": {"test": "%s"}}\n' % (script or "none")
    known = JS_KNOWN.replace("test(", "it(") if "it(" in test else JS_KNOWN
    edits: dict[str, dict[str, str | None]] = {
        "harmless": {"NOTES.md": "notes\n"},
        "breaks": {"calc.js": JS_CALC.replace("a + b", "a * b")},
        "removes": {"test/calc.test.js": test.replace(known, "")},
        "skips": {"test/calc.test.js": test.replace(known, known.replace("(", ".skip(", 1))},
        "fixes": {"calc.js": JS_CALC.replace("VALUE = 1", "VALUE = 2")},
        "crashes": {"calc.js": "exports.add = (a, b => a + b;\n"},
    }
    return files, edits


VITEST_CONFIG = {"vitest.config.mjs": "export default { test: { globals: true } };\n"}

# uvu: test files import it (ES module syntax: natively in a .mjs file, or through `-r esm`)
UVU_KNOWN = "test('known bug', () => { assert.is(calc.VALUE, 2); });\n"
UVU_TEST = ("import { test } from 'uvu';\nimport * as assert from 'uvu/assert';\n"
            "import * as calc from '../calc.js';\n\n" + UVU_KNOWN
            + "test('adds', () => { assert.is(calc.add(1, 2), 3); });\n\ntest.run();\n")


def uvu(script: str, test_file: str) -> tuple[dict[str, str], dict[str, Any]]:
    """A project whose tests uvu runs, its test file at `test_file` (dequal's layout)."""
    files, edits = js(JEST_TEST)
    del files["test/calc.test.js"]
    files[test_file] = UVU_TEST
    files["package.json"] = ('{"name": "calc", "private": true, "scripts": {"test": "%s"}, '
                             '"devDependencies": {"esm": "3.2.25", "uvu": "0.5.6"}}\n' % script)
    edits["removes"] = {test_file: UVU_TEST.replace(UVU_KNOWN, "")}
    edits["skips"] = {test_file: UVU_TEST.replace(UVU_KNOWN, UVU_KNOWN.replace("test(", "test.skip("))}
    return files, edits


# The same in TypeScript, loaded through tsm (`uvu -r tsm test`): tsm's require hook compiles each .ts
# file as uvu's runner requires it, and `uvu` itself comes from Node's module cache (uvu_preload.cjs)
UVU_TS_TEST = UVU_TEST.replace("test('adds', () => { assert.is(calc.add(1, 2), 3); });",
                               "const sum = (a: number, b: number): number => calc.add(a, b);\n"
                               "test('adds', () => { assert.is(sum(1, 2), 3); });")


def uvu_ts(script: str) -> tuple[dict[str, str], dict[str, Any]]:
    files, edits = uvu(script, "test/calc.ts")
    files["test/calc.ts"] = UVU_TS_TEST
    files["package.json"] = files["package.json"].replace('"esm": "3.2.25"', '"tsm": "2.3.0"')
    edits["removes"] = {"test/calc.ts": UVU_TS_TEST.replace(UVU_KNOWN, "")}
    edits["skips"] = {"test/calc.ts": UVU_TS_TEST.replace(UVU_KNOWN, UVU_KNOWN.replace("test(", "test.skip("))}
    return files, edits

# Test files run by plain node, with assert: each stops at its first failing assertion, so each file
# is one test read by its exit code (node_script.py). The base's known bug in its own file:
NODE_ASSERT = "const assert = require('node:assert');\nconst calc = require('../calc.js');\n\n"
NODE_KNOWN = "assert.strictEqual(calc.VALUE, 2);\n"
NODE_FILES = {"calc.js": JS_CALC, "test/known.js": NODE_ASSERT + NODE_KNOWN,
              "test/adds.js": NODE_ASSERT + "assert.strictEqual(calc.add(1, 2), 3);\n"}
NODE_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"calc.js": JS_CALC.replace("a + b", "a * b")},
    "removes": {"test/known.js": None},
    "skips": {"test/known.js": NODE_ASSERT + "// " + NODE_KNOWN},  # no skip in plain node: commented out
    "fixes": {"calc.js": JS_CALC.replace("VALUE = 1", "VALUE = 2")},
    "crashes": {"calc.js": "exports.add = (a, b => a + b;\n"},
}
# One file holding both: a base failing at its first assertion never runs the second
NODE_ONE = {"calc.js": JS_CALC, "test.js": (NODE_ASSERT + NODE_KNOWN).replace("../calc.js", "./calc.js")
            + "assert.strictEqual(calc.add(1, 2), 3);\n"}
NODE_ONE_EDITS: dict[str, dict[str, str | None]] = {
    **{k: v for k, v in NODE_EDITS.items() if k not in ("removes", "skips")},
    "removes": {"test.js": NODE_ONE["test.js"].replace(NODE_KNOWN, "")},
    "skips": {"test.js": NODE_ONE["test.js"].replace(NODE_KNOWN, "// " + NODE_KNOWN)},
}
# console.assert (flatted's tests): it prints "Assertion failed" and goes on, exit code 0; each call is
# recorded by its message, so the file's assertions are tests of their own. No skip there: commented out,
# an assertion is removed
CONSOLE_KNOWN = "console.assert(calc.VALUE === 2, 'known bug');\n"
CONSOLE_TEST = ("const calc = require('../calc.js');\n\n" + CONSOLE_KNOWN
                + "console.assert(calc.add(1, 2) === 3, 'adds');\n")
CONSOLE_FILES = {"calc.js": JS_CALC, "test/index.js": CONSOLE_TEST,
                 "package.json": '{"name": "calc", "private": true, "scripts": {"test": "node test/index.js"}}\n'}
CONSOLE_EDITS: dict[str, dict[str, str | None]] = {
    **{k: v for k, v in NODE_EDITS.items() if k not in ("removes", "skips")},
    "removes": {"test/index.js": CONSOLE_TEST.replace(CONSOLE_KNOWN, "")},
    "skips": {"test/index.js": CONSOLE_TEST.replace(CONSOLE_KNOWN, "// " + CONSOLE_KNOWN)},
}
# the file that fails on the base fails again: its later assertions ran in neither run (undecided);
# it passes after the ticket changed it: a fix cannot be told from the assertion taken out (undecided)
NODE_FILE_UNKNOWN = {"harmless": UNDECIDED, "skips": UNDECIDED}
NODE_ONE_UNKNOWN = {"harmless": UNDECIDED, "breaks": UNDECIDED, "removes": UNDECIDED, "skips": UNDECIDED,
                    "crashes": UNDECIDED}


# -- Ruby: rspec ---------------------------------------------------------------------------------

RB_CALC = "module Calc\n  VALUE = 1\n  def self.add(a, b) = a + b\nend\n"
RB_KNOWN = "  it('known bug') { expect(Calc::VALUE).to eq(2) }\n"
RB_SPEC = ("require_relative '../calc'\n\nRSpec.describe 'Calc' do\n" + RB_KNOWN
           + "  it('adds') { expect(Calc.add(1, 2)).to eq(3) }\nend\n")
RB_FILES = {"calc.rb": RB_CALC, "spec/calc_spec.rb": RB_SPEC}
RB_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"calc.rb": RB_CALC.replace("a + b", "a * b")},
    "removes": {"spec/calc_spec.rb": RB_SPEC.replace(RB_KNOWN, "")},
    "skips": {"spec/calc_spec.rb": RB_SPEC.replace(RB_KNOWN, RB_KNOWN.replace("  it(", "  xit("))},
    "fixes": {"calc.rb": RB_CALC.replace("VALUE = 1", "VALUE = 2")},
    "crashes": {"calc.rb": "module Calc\n  def self.add(a, b = a + b\nend\n"},
}

# -- bats (TAP, read from the output) -----------------------------------------------------------

SH_CALC = "VALUE=1\nadd() { echo $(($1 + $2)); }\n"
BATS_KNOWN = '@test "known bug" { [ "$VALUE" = 2 ]; }\n'
BATS_TEST = 'setup() { . ./calc.sh; }\n' + BATS_KNOWN + '@test "adds" { [ "$(add 1 2)" = 3 ]; }\n'
BATS_FILES = {"calc.sh": SH_CALC, "test/calc.bats": BATS_TEST}
BATS_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"calc.sh": SH_CALC.replace("$1 + $2", "$1 * $2")},
    "removes": {"test/calc.bats": BATS_TEST.replace(BATS_KNOWN, "")},
    "skips": {"test/calc.bats": BATS_TEST.replace(BATS_KNOWN, BATS_KNOWN.replace("{ [", "{ skip; ["))},
    "fixes": {"calc.sh": SH_CALC.replace("VALUE=1", "VALUE=2")},
    "crashes": {"test/calc.bats": BATS_TEST.replace("setup() {", "setup() { (")},
}

# -- Rust and Go ---------------------------------------------------------------------------------

RS_LIB = ("pub const VALUE: i32 = 1;\n\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
          "#[cfg(test)]\nmod tests {\n")
RS_KNOWN = "    #[test]\n    fn known_bug() {\n        assert_eq!(super::VALUE, 2);\n    }\n\n"
RS_TESTS = RS_KNOWN + "    #[test]\n    fn adds() {\n        assert_eq!(super::add(1, 2), 3);\n    }\n}\n"
RS_FILES = {"Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": RS_LIB + RS_TESTS}
RS_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"src/lib.rs": (RS_LIB + RS_TESTS).replace("a + b", "a * b")},
    "removes": {"src/lib.rs": RS_LIB + RS_TESTS.replace(RS_KNOWN, "")},
    "skips": {"src/lib.rs": RS_LIB + RS_TESTS.replace(RS_KNOWN, RS_KNOWN.replace("#[test]", "#[test]\n    #[ignore]"))},
    "fixes": {"src/lib.rs": (RS_LIB + RS_TESTS).replace("VALUE: i32 = 1", "VALUE: i32 = 2")},
    "crashes": {"src/lib.rs": (RS_LIB + RS_TESTS).replace("a + b", "a + ")},
}
GO_CALC = "package calc\n\nconst Value = 1\n\nfunc Add(a, b int) int { return a + b }\n"
GO_KNOWN = 'func TestKnownBug(t *testing.T) {\n\tif Value != 2 {\n\t\tt.Fatal("known bug")\n\t}\n}\n\n'
GO_TEST = ('package calc\n\nimport "testing"\n\n' + GO_KNOWN
           + 'func TestAdds(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal("adds")\n\t}\n}\n')
GO_FILES = {"go.mod": "module example.com/calc\n\ngo 1.19\n", "calc.go": GO_CALC, "calc_test.go": GO_TEST}
GO_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"calc.go": GO_CALC.replace("a + b", "a * b")},
    "removes": {"calc_test.go": GO_TEST.replace(GO_KNOWN, "")},
    "skips": {"calc_test.go": GO_TEST.replace(GO_KNOWN, GO_KNOWN.replace("{\n\tif", "{\n\tt.Skip()\n\tif"))},
    "fixes": {"calc.go": GO_CALC.replace("Value = 1", "Value = 2")},
    "crashes": {"calc.go": GO_CALC.replace("a + b", "a + ")},
}
NATIVE_ENV = {"GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "CARGO_NET_OFFLINE": "true"}


def make(recipe: str) -> dict[str, str]:
    return {"Makefile": f".PHONY: test\ntest:\n\t{recipe}\n"}  # a test/ folder: still run


# A command no reader understands: a script that runs the tests and prints only its own words
OPAQUE = {"check.py": textwrap.dedent("""\
    import os, sys, unittest
    with open(os.devnull, "w") as quiet:
        ok = unittest.TextTestRunner(stream=quiet).run(unittest.defaultTestLoader.discover(".")).wasSuccessful()
    print("checks passed" if ok else "checks failed")
    sys.exit(0 if ok else 1)
""")}
# A command no reader understands on a base that already fails (docs/checks.md, "The gate
# enumerated"): middle cannot tell a harmless ticket from a breaking one, so neither completes
# (undecided: stopped, its work kept, a person decides); a pass is a fix only when the ticket
# touched no test or runner config (check.py is the command's own script).
BY_EXIT_CODE = {"harmless": UNDECIDED, "breaks": UNDECIDED, "removes": UNDECIDED, "skips": UNDECIDED,
                "crashes": UNDECIDED}
# With baseline = "exit-code": no worse when the failing output is the base's, line for line once each
# run's noise is left out (output_lines.py). check.py prints "checks failed" and nothing else, so a
# ticket that breaks another test, or crashes, prints the same: the risk that setting takes.
BY_EXIT_CODE_BASELINE = {"harmless": NO_WORSE, "breaks": NO_WORSE, "removes": UNDECIDED, "skips": UNDECIDED,
                         "crashes": NO_WORSE}
# The same for a runner middle does not read that names its failures in its own words (`FAIL
# known_bug`, a count): a new failure is a new line, and stops the ticket naming it.
TALKATIVE = {"check.py": textwrap.dedent("""\
    import os, sys, unittest
    with open(os.devnull, "w") as quiet:
        r = unittest.TextTestRunner(stream=quiet).run(unittest.defaultTestLoader.discover("."))
    for test, _ in r.failures + r.errors:
        print("FAIL", test.id().rsplit(".", 1)[-1])
    print(f"Total: {r.testsRun} Failed: {len(r.failures) + len(r.errors)} (in 0.01s)")
    sys.exit(0 if r.wasSuccessful() else 1)
""")}
BY_OUTPUT_BASELINE = {"harmless": NO_WORSE, "breaks": UNDECIDED, "removes": UNDECIDED, "skips": UNDECIDED,
                      "crashes": UNDECIDED}

# The same on a Rust project whose script hides cargo's output (`cargo test -q >/dev/null`): read by
# its exit code, its tests inside src/lib.rs; a ticket removing or ignoring one is seen from its diff
# (touched_tests.in_source), so only the fix passes
RS_HIDDEN = {"scripts/test.sh": "cargo test -q >/dev/null 2>&1 && echo 'checks passed' || { echo 'checks failed'; "
                                "exit 1; }\n"}
# A Python module's doctests run by a script that prints only its own words
DOC_CALC = ('"""Calc.\n\n>>> VALUE\n2\n"""\n\nVALUE = 1\n\n\ndef add(a, b):\n    """Add.\n\n'
            '    >>> add(1, 2)\n    3\n    """\n    return a + b\n')
DOC_KNOWN = ">>> VALUE\n2\n"
DOC_FILES = {"calc.py": DOC_CALC, "check.py": textwrap.dedent("""\
    import contextlib, doctest, io, sys
    import calc
    with contextlib.redirect_stdout(io.StringIO()):
        failed, _ = doctest.testmod(calc)
    print("checks passed" if not failed else "checks failed")
    sys.exit(1 if failed else 0)
""")}
DOC_EDITS: dict[str, dict[str, str | None]] = {
    "harmless": {"NOTES.md": "notes\n"},
    "breaks": {"calc.py": DOC_CALC.replace("a + b", "a * b")},
    "removes": {"calc.py": DOC_CALC.replace(DOC_KNOWN, "")},
    "skips": {"calc.py": DOC_CALC.replace(">>> VALUE", ">>> VALUE  # doctest: +SKIP")},
    "fixes": {"calc.py": DOC_CALC.replace("VALUE = 1", "VALUE = 2")},
    "crashes": {"calc.py": "def add(:\n"},
}

# tox and nox running the system's pytest: nothing installed, nothing downloaded
TOX_INI = textwrap.dedent(f"""\
    [tox]
    envlist = py
    skipsdist = true

    [testenv]
    skip_install = true
    system_site_packages = true
    allowlist_externals = *
    commands = {PYTEST}
""")
NOXFILE = textwrap.dedent(f"""\
    import nox

    @nox.session(python=False)
    def tests(session):
        session.run(*{PYTEST.split()!r}, external=True)
""")
# hatch running the system's pytest, offline: no install of the project (`skip-install`), no
# dependency (its `hatch test` env's own list, pytest's plugins, emptied), the system's packages seen
# from its virtualenv; each env at one path beside the row's folders (`../`), so the base's is reused
HATCH_TOML = textwrap.dedent(f"""\
    [envs.default]
    skip-install = true
    system-packages = true
    path = "../.hatch-default"

    [envs.default.scripts]
    test = "{PYTEST}"

    [envs.hatch-test]
    skip-install = true
    system-packages = true
    dependencies = []
    path = "../.hatch-test"
""")

# pytest with format = "exit-code", or "diagnostics" (`--tb=line` names a file and line, no code: no
# diagnostic), on a base that already fails: read by its exit code and output. Its output names the
# new failure or the crash, so those fail; the same output is undecided; a pass is a fix only where
# the ticket touched no test (docs/checks.md, "The gate enumerated")
BY_OUTPUT = {"harmless": UNDECIDED, "breaks": FAILED, "removes": UNDECIDED, "skips": UNDECIDED, "crashes": FAILED}

# A test's body rewritten so that it passes, on lines with no test marker (the failing Rust test's
# assert, the failing doctest's expected output): seen against the base file's text
# (touched_tests.spans), undecided; code beside the tests in the same file changed: a fix
BODY_EDITS: dict[str, dict[str, dict[str, str | None]]] = {
    "exit code>cargo test": {
        "rewrites": {"src/lib.rs": (RS_LIB + RS_TESTS).replace("assert_eq!(super::VALUE, 2);", "assert!(true);")},
        "fixes beside": {"src/lib.rs": (RS_LIB + RS_TESTS).replace("VALUE: i32 = 1", "VALUE: i32 = 2")
                         .replace("    a + b\n", "    b + a\n")}},
    "exit code>doctest": {
        "rewrites": {"calc.py": DOC_CALC.replace(DOC_KNOWN, ">>> VALUE\n1\n")},
        "fixes beside": {"calc.py": DOC_CALC.replace("VALUE = 1", "VALUE = 2").replace("return a + b",
                                                                                       "return b + a")}},
}

ROWS: list[Row] = [
    Row("pytest", PYTEST, PY_FILES, PY_EDITS, ()),
    Row("unittest", UNITTEST, PY_FILES, PY_EDITS, ()),
    Row("make>pytest", "make test", {**PY_FILES, **make(PYTEST)}, PY_EDITS, ("make",), behind=("pytest",)),
    Row("make>unittest", "make test", {**PY_FILES, **make(UNITTEST)}, PY_EDITS, ("make",), behind=("unittest",)),
    Row("script>pytest+lint", "sh scripts/test.sh",
        {**PY_FILES, "scripts/test.sh": f"{PYTEST}; s=$?\n{PY} -m ruff check -q --no-cache calc.py || s=1\nexit $s\n"},
        PY_EDITS, behind=("pytest",)),
    Row("node --test", "node --test test/", *js(NODE_TEST), tools=("node",)),
    Row("npm test>node --test", "npm test", *js(NODE_TEST, script="node --test test/"), tools=("npm",)),
    Row("make>node --test", "make test", *js(NODE_TEST, extra=make("node --test test/")), tools=("make", "node"),
        behind=("node-test",)),
    Row("jest", "jest --ci", *js(JEST_TEST), tools=("jest",)),
    Row("npm test>jest", "npm test", *js(JEST_TEST, script="jest --ci"), tools=("npm", "jest")),
    Row("npm test>jest+more", "npm test", *js(JEST_TEST, script="jest --ci && node -e 0"), tools=("npm", "jest"),
        behind=("jest",)),
    Row("make>jest", "make test", *js(JEST_TEST, extra=make("jest --ci")), tools=("make", "jest"), behind=("jest",)),
    Row("vitest", "vitest run", *js(JEST_TEST, extra=VITEST_CONFIG), tools=("vitest",)),
    # behind a wrapper vitest and mocha get their report options from middle's preload (jest_argv.cjs)
    Row("make>vitest", "make test", *js(JEST_TEST, extra={**VITEST_CONFIG, **make("vitest run")}),
        tools=("make", "vitest"), behind=("vitest",)),
    # the script's own --bail would stop vitest at its first failures (and vitest refuses a --bail=0
    # beside it): read as a wrapper, whose preload takes it out of vitest's argv, so every test runs
    Row("npm test>vitest --bail", "npm test", *js(JEST_TEST, script="vitest run --bail=1", extra=VITEST_CONFIG),
        tools=("npm", "vitest"), behind=("vitest",)),
    Row("make>vitest --bail 1", "make test", *js(JEST_TEST, extra={**VITEST_CONFIG, **make("vitest run --bail 1")}),
        tools=("make", "vitest"), behind=("vitest",)),
    Row("mocha", "mocha", *js(MOCHA_TEST), tools=("mocha",)),
    Row("npm test>mocha", "npm test", *js(MOCHA_TEST, script="mocha"), tools=("npm", "mocha")),
    Row("npm test>mocha+more", "npm test", *js(MOCHA_TEST, script="mocha && node -e 0"), tools=("npm", "mocha"),
        behind=("mocha",)),
    Row("make>mocha", "make test", *js(MOCHA_TEST, extra=make("mocha")), tools=("make", "mocha"), behind=("mocha",)),
    # uvu prints no passing test's name: its test API is wrapped in its own process (uvu_preload.cjs)
    Row("npm test>uvu -r esm", "npm test", *uvu("uvu -r esm test", "test/calc.js"), tools=("uvu", "npm"),
        packages=("uvu", "esm"), behind=("uvu",)),
    Row("uvu", "uvu test", *uvu("uvu test", "test/calc.test.mjs"), tools=("uvu",), packages=("uvu",), behind=("uvu",)),
    Row("npm test>uvu -r tsm", "npm test", *uvu_ts("uvu -r tsm test"), tools=("uvu", "npm"), packages=("uvu", "tsm"),
        behind=("uvu",)),
    Row("uvu -r tsm", "uvu -r tsm test", *uvu_ts("uvu -r tsm test"), tools=("uvu",), packages=("uvu", "tsm"),
        behind=("uvu",)),
    # test files run by plain node: each file one test, by its exit code (node_script.cjs)
    Row("node test.js", "node test.js", NODE_ONE, NODE_ONE_EDITS, ("node",), leaks=NODE_ONE_UNKNOWN,
        behind=("node-script",)),
    Row("npm test>node files", "npm test",
        {**NODE_FILES, "package.json": '{"name": "calc", "private": true, "scripts": '
                                      '{"test": "node test/known.js; node test/adds.js"}}\n'},
        NODE_EDITS, ("npm", "node"), leaks=NODE_FILE_UNKNOWN, behind=("node-script",)),
    Row("make>node files", "make test",
        {**NODE_FILES, "Makefile": ".PHONY: test\ntest:\n\t-node test/known.js\n\tnode test/adds.js\n"},
        NODE_EDITS, ("make", "node"), leaks=NODE_FILE_UNKNOWN, behind=("node-script",)),
    # console.assert never fails the run: each call read by its message (the sweep's flatted)
    Row("npm test>node console.assert", "npm test", CONSOLE_FILES, CONSOLE_EDITS, ("npm", "node"),
        leaks={"skips": FAILED}, behind=("node-script",)),
    Row("rspec", "rspec", RB_FILES, RB_EDITS, ("rspec",)),
    Row("rake spec", "rake spec", {**RB_FILES, "Rakefile": "require 'rspec/core/rake_task'\n"
                                   "RSpec::Core::RakeTask.new(:spec)\n"}, RB_EDITS, ("rake", "rspec")),
    Row("make>rspec", "make test", {**RB_FILES, **make("rspec")}, RB_EDITS, ("make", "rspec"), behind=("rspec",)),
    Row("bats", "bats test", BATS_FILES, BATS_EDITS, ("bats",), behind=("tap",)),
    Row("make>bats", "make test", {**BATS_FILES, **make("bats test")}, BATS_EDITS, ("make", "bats"), behind=("tap",)),
    Row("cargo test", "cargo test", RS_FILES, RS_EDITS, ("cargo",), env=NATIVE_ENV),
    # behind a wrapper: middle's cargo first on PATH adds --no-fail-fast, libtest's lines are read
    Row("make>cargo test", "make test", {**RS_FILES, **make("cargo test")}, RS_EDITS, ("make", "cargo"),
        env=NATIVE_ENV, behind=("cargo",)),
    Row("go test", "go test ./...", GO_FILES, GO_EDITS, ("go",), env=NATIVE_ENV),
    # behind a wrapper go test is verbose through GOFLAGS=-v (added to the user's), read from its lines
    Row("make>go test", "make test", {**GO_FILES, **make("go test ./...")}, GO_EDITS, ("make", "go"),
        env=NATIVE_ENV, behind=("go",)),
    # GOFLAGS=-v reaches go vet and go build in the same recipe: they still pass, listing packages
    Row("make>go vet+build+test", "make test", {**GO_FILES, **make("go vet ./... && go build ./... && go test ./...")},
        GO_EDITS, ("make", "go"), env=NATIVE_ENV, behind=("go",)),
    # the other wrappers middle knows by name (wrapper.WRAPPERS), each running pytest: tox on the
    # system's Python (nothing installed, nothing downloaded), nox with no virtualenv, just
    Row("tox>pytest", "tox -q", {**PY_FILES, "tox.ini": TOX_INI}, PY_EDITS, ("tox",), behind=("pytest",)),
    Row("nox>pytest", "nox -s tests", {**PY_FILES, "noxfile.py": NOXFILE}, PY_EDITS, ("nox",), behind=("pytest",)),
    Row("just>pytest", "just test", {**PY_FILES, "justfile": f"test:\n    {PYTEST}\n"}, PY_EDITS, ("just",),
        behind=("pytest",)),
    Row("hatch run>pytest", "hatch run test", {**PY_FILES, "hatch.toml": HATCH_TOML}, PY_EDITS, ("hatch",),
        behind=("pytest",)),
    Row("hatch test>pytest", "hatch test test_calc.py", {**PY_FILES, "hatch.toml": HATCH_TOML}, PY_EDITS, ("hatch",),
        behind=("pytest",)),
    # pnpm and yarn running the package's test script: its runner asked for its report after the name
    Row("pnpm test>jest", "pnpm test", *js(JEST_TEST, script="jest --ci"), tools=("pnpm", "jest")),
    Row("yarn test>mocha", "yarn test", *js(MOCHA_TEST, script="mocha"), tools=("yarn", "mocha")),
    # each format a command may name: its own JUnit report, TAP said, its exit code, diagnostics lines
    Row("node --test, junit", "node --test --test-reporter=junit --test-reporter-destination=junit.xml test/",
        *js(NODE_TEST), tools=("node",), format="junit", junit="junit.xml"),
    Row("bats, format tap", "bats test", BATS_FILES, BATS_EDITS, ("bats",), format="tap"),
    Row("pytest, format exit-code", PYTEST, PY_FILES, PY_EDITS, (), format="exit-code", leaks=BY_OUTPUT),
    Row("pytest, format diagnostics", f"{PYTEST} --tb=line", PY_FILES, PY_EDITS, (), format="diagnostics",
        leaks=BY_OUTPUT),
    Row("exit code", f"{PY} check.py", {**PY_FILES, **OPAQUE}, PY_EDITS, (), leaks=BY_EXIT_CODE),
    Row("exit code>cargo test", "sh scripts/test.sh", {**RS_FILES, **RS_HIDDEN}, RS_EDITS, ("cargo",),
        leaks=BY_EXIT_CODE, env=NATIVE_ENV),
    # a crash is the import's traceback, new in its output: failed, as it should be
    Row("exit code>doctest", f"{PY} check.py", DOC_FILES, DOC_EDITS, (),
        leaks={k: v for k, v in BY_EXIT_CODE.items() if k != "crashes"}),
    Row("exit code, baseline", f"{PY} check.py", {**PY_FILES, **OPAQUE}, PY_EDITS, (),
        leaks=BY_EXIT_CODE_BASELINE, baseline="exit-code"),
    Row("exit code, baseline, names failures", f"{PY} check.py", {**PY_FILES, **TALKATIVE}, PY_EDITS, (),
        leaks=BY_OUTPUT_BASELINE, baseline="exit-code"),
]
ROW = {r.name: r for r in ROWS}
# The rows in two modules (pytest-xdist's loadscope runs a module on one worker): JavaScript and Ruby
# in test_gate_matrix_js.py, the others in test_gate_matrix.py
_JS_RUBY = ("node", "npm", "jest", "vitest", "mocha", "uvu", "rspec", "rake")
JS_RUBY_ROWS = [n for n in ROW if any(w in n for w in _JS_RUBY)]
OTHER_ROWS = [n for n in ROW if n not in JS_RUBY_ROWS]


CI_TOOLS = {"make", "node", "npm", "jest", "vitest", "mocha", "uvu", "rspec", "rake", "cargo", "go", "gcc", "bats",
            "hatch"}


def _missing(row: Row) -> str | None:
    return next((f"{t} is not installed" + (" (.ci/run installs it)" if t in CI_TOOLS else " here (.ci/run does not "
                 "install it: its row runs where it is)") for t in row.tools if shutil.which(t) is None), None) or next(
        (f"{p} is not installed beside {row.tools[0]} (.ci/run installs it)" for p in row.packages
         if not (_global_modules(row) / p).is_dir()), None)


def _global_modules(row: Row) -> Path:
    """The node_modules folder the row's first tool is installed in (`npm install -g`)."""
    return Path(os.path.realpath(shutil.which(row.tools[0]) or "/")).parent.parent


def _link_packages(row: Row, folder: Path) -> None:
    for name in row.packages:
        link = folder / "node_modules" / name
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(_global_modules(row) / name)


def _lay_out(folder: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        path = folder / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if rel.endswith(".sh"):
            path.chmod(0o755)


class Matrix:
    """Each row's base, run once (a row's five tickets compare with it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bases: dict[str, CheckResult] = {}

    def env(self, row: Row) -> dict[str, str]:
        # one cargo target folder per row: the tickets' builds reuse the base's
        # hatch's own data (its Python installs, its cache) in the matrix's folder, not the user's
        return {**row.env, "CARGO_TARGET_DIR": str(self.root / "target" / row.name.replace(" ", "_")),
                "HATCH_DATA_DIR": str(self.root / "hatch-data")}

    def folder(self, row: Row, scenario: str) -> Path:
        return self.root / row.name.replace(" ", "_").replace(">", "_") / scenario

    def base(self, row: Row) -> CheckResult:
        if row.name not in self.bases:
            folder = self.folder(row, "base")
            _lay_out(folder, dict(row.files))
            _link_packages(row, folder)
            self.bases[row.name] = run_check(row.spec(), folder, timeout_s=120, env=self.env(row))
        return self.bases[row.name]

    def ticket(self, row: Row, scenario: str, edits: dict[str, str | None] | None = None
               ) -> tuple[CheckResult, Verdict]:
        """One ticket: the row's edits for `scenario`, or `edits` (a scenario of one row's own)."""
        base = self.base(row)
        edits = row.edits[scenario] if edits is None else edits
        folder = self.folder(row, scenario)
        _lay_out(folder, dict(row.files))
        _lay_out(folder, edits)
        _link_packages(row, folder)
        result = run_check(row.spec(), folder, timeout_s=120, env=self.env(row))
        # the paths the ticket changed, their diff and their base text, as the graph gives them
        # (orchestrator/graph/checking.py)
        return result, judge(result, base, row.spec(), changed=sorted(edits), diff=diff_of(row.files, edits),
                             bases={path: row.files[path] for path in edits if path in row.files})


def diff_of(files: dict[str, str], edits: dict[str, str | None]) -> str:
    """The edits' diff against the row's files, in git's unified format (a/ and b/ prefixes)."""
    return "".join("".join(difflib.unified_diff(
        files.get(path, "").splitlines(True), (text or "").splitlines(True),
        f"a/{path}" if path in files else "/dev/null", f"b/{path}" if text is not None else "/dev/null"))
        for path, text in sorted(edits.items()))


def check_cell(matrix: Matrix, name: str, scenario: str) -> None:
    """One row's one ticket: the verdict the promise (or the row's documented cost) says."""
    row = ROW[name]
    if (why := _missing(row)) is not None:
        pytest.skip(why)
    base = matrix.base(row)
    assert base.problem is None and not base.passed, (base.problem, base.tail)
    if row.behind:  # the runners the row claims to read behind its wrapper are the ones read
        read = [base.runner] if base.runner == "tap" else base.extra.get("read")
        assert read == sorted(row.behind), (read, base.tail)
    result, verdict = matrix.ticket(row, scenario)
    said = (verdict.outcome, verdict.reason, verdict.new_failures, verdict.removed_tests, result.problem,
            result.tail[-1500:])
    if scenario in row.leaks:  # read by its exit code alone: the documented cost, asserted as it is
        assert verdict.outcome == row.leaks[scenario], said
        if verdict.outcome == UNDECIDED:  # the sentence says why (the graph adds the ways out)
            assert verdict.reason and not verdict.ok, said
            if result.passed:  # a pass that may have removed a test: naming the file it is in
                assert all(f"`{path}`" in verdict.reason for path in row.edits[scenario]), said
        return
    if scenario == "harmless":
        assert verdict.outcome == NO_WORSE, said
        assert any("known" in n.lower() for n in verdict.already_failing), said
        assert "known" in verdict.note().lower(), verdict.note()
    elif scenario == "breaks":
        assert verdict.outcome == FAILED, said
        assert any("adds" in n.lower() for n in verdict.new_failures), said
    elif scenario in ("removes", "skips"):
        assert verdict.outcome == FAILED, said
        what = "(removed)" if scenario == "removes" else "(skipped)"
        assert any("known" in t.lower() and t.endswith(what) for t in verdict.removed_tests), said
    elif scenario == "fixes":
        assert verdict.outcome == PASSED, said
    else:  # crashes before any test: never complete
        assert verdict.outcome == FAILED, said


# -- the enumeration: every reader middle registers has its rows, or an exemption saying why ------

# A reader with no row in the table, and why (docs/checks.md, "The gate enumerated", says the same)
EXEMPT: dict[str, str] = {}


def registered() -> set[str]:
    """Every way middle reads a check, from the code: each runner a line may run
    (instrument.runner_of, the JavaScript runners, the report each is asked for, the ones read from
    their output, TAP), each runner read behind a wrapper (wrapper.runs' kinds, and those whose
    tests a wrapper's output lists), each wrapper known by name (wrapper.WRAPPERS), each format
    and baseline a command may say (CheckCommand's)."""
    from typing import get_args

    from orchestrator.checks.instrument import FROM_OUTPUT
    from orchestrator.checks.runner import OWN_REPORT
    from orchestrator.checks.runners import javascript, tap, wrapper

    keys = {f"runner:{r}" for r in [*OWN_REPORT, *FROM_OUTPUT, *javascript.RUNNERS, tap.RUNNER]}
    # behind a wrapper: the reports asked through the environment, the runners whose output lists
    # every test (go, cargo), and TAP (runner.py reads a wrapper's TAP output: tap.looks_like)
    keys |= {f"behind:{r.kind}" for r in wrapper.runs([], "")} | {f"behind:{r}" for r in FROM_OUTPUT}
    keys |= {f"behind:{tap.RUNNER}"} | {f"wrapper:{w}" for w in wrapper.WRAPPERS}
    for option in ("format", "baseline"):
        keys |= {f"{option}:{v}" for v in get_args(CheckCommand.model_fields[option].annotation)}
    return keys


def covers(row: Row, tmp: Path) -> set[str]:
    """What a row exercises, from the code too: the runner middle prepares its line for, the
    wrapper its line starts with, its format and baseline, and the runners it reads behind a
    wrapper (its `behind`, which check_cell asserts on its base run)."""
    import shlex
    import tempfile

    from orchestrator.checks import instrument
    from orchestrator.checks.runners import wrapper

    folder = Path(tempfile.mkdtemp(dir=tmp))
    _lay_out(folder, dict(row.files))
    (folder / ".prep").mkdir()  # where middle's own report files would go (nothing runs)
    prepared = instrument.prepare(row.spec(), folder / ".prep", {**os.environ, **row.env}, folder)
    keys = {f"format:{row.format}", f"baseline:{row.baseline}"} | {f"behind:{b}" for b in row.behind}
    if prepared.runner not in ("", wrapper.RUNNER):
        keys.add(f"runner:{prepared.runner}")
    first = shlex.split(row.command)[0]
    if first in wrapper.WRAPPERS:
        keys.add(f"wrapper:{first}")
    return keys
