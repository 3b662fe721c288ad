"""What a check's output is read as: diagnostics lines of each tool (ruff, flake8, pylint, mypy,
pyright, eslint, tsc, gcc/clang, go vet, clippy and rustc), compared without line numbers;
JUnit reports of each runner family (pytest, jest-junit, surefire, go-junit-report, nested
suites), a file that is not JUnit, and an XML bomb refused unread."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from orchestrator.checks import diagnostics, junit
from orchestrator.checks.instrument import runner_of
from orchestrator.checks.runner import JUNIT, CheckResult
from orchestrator.checks.verdict import FAILED, NO_WORSE, PASSED, judge


@pytest.fixture
def src(tmp_path: Path) -> Path:
    for rel in ("app.py", "pkg/mod.py", "src/main.rs", "web/a.js", "web/b.ts", "x.c", "main.go"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    return tmp_path


@pytest.mark.parametrize("line, ident", [
    ("app.py:1:8: F401 [*] `os` imported but unused", "app.py: [F401] `os` imported but unused"),  # ruff concise
    ("app.py:1:1: F401 'os' imported but unused", "app.py: [F401] 'os' imported but unused"),  # flake8
    ("pkg/mod.py:3: [C0116(missing-function-docstring), f] Missing function or method docstring",
     "pkg/mod.py: [C0116(missing-function-docstring), f] Missing function or method docstring"),  # pylint parseable
    ('app.py:4: error: Incompatible types in assignment (expression has type "str", variable has type "int")  '
     '[assignment]', 'app.py: [assignment] Incompatible types in assignment (expression has type "str", variable '
     'has type "int")'),  # mypy
    ("  {root}/app.py:2:5 - error: \"x\" is not defined (reportUndefinedVariable)",
     "app.py: [reportUndefinedVariable] \"x\" is not defined"),  # pyright
    ("{root}/web/a.js:1:7: 'a' is assigned a value but never used. [Error/no-unused-vars]",
     "web/a.js: [Error/no-unused-vars] 'a' is assigned a value but never used."),  # eslint unix
    ("web/b.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.",
     "web/b.ts: [TS2322] Type 'string' is not assignable to type 'number'."),  # tsc --pretty false
    ("x.c:3:9: warning: unused variable 'y' [-Wunused-variable]", "x.c: [-Wunused-variable] unused variable 'y'"),
    ("./main.go:6:2: fmt.Printf format %d has arg \"a\" of wrong type string",
     "main.go: fmt.Printf format %d has arg \"a\" of wrong type string"),  # go vet
    ("src/main.rs:2:9: warning: unused variable: `x`", "src/main.rs: unused variable: `x`"),  # clippy short
])
def test_each_tools_diagnostic_line_is_one_identity(src, line, ident):
    assert diagnostics.parse(line.format(root=src), src) == Counter({ident: 1})


def test_header_then_arrow_forms_ruff_full_and_rustc(src):
    out = ("F401 [*] `os` imported but unused\n --> app.py:1:8\n  |\n1 | import os\n"
           "warning: unused variable: `x`\n --> src/main.rs:2:9\n  |\n")
    assert sorted(diagnostics.parse(out, src)) == ["app.py: [F401] `os` imported but unused",
                                                   "src/main.rs: unused variable: `x`"]


def test_lines_that_are_not_problems_are_not_taken(src):
    out = ("Found 1 error in 1 file (checked 3 source files)\n"
           '  File "app.py", line 3, in <module>\n'
           "2026-11-28 10:00:01: server started\n"  # a log line: no such file
           "app.py:4: note: See https://mypy.readthedocs.io\n"  # notes explain, they are not problems
           "elsewhere.py:1:1: F401 'os' imported but unused\n")  # not a file of the project
    assert diagnostics.parse(out, src) == Counter()


def test_a_moved_problem_is_the_same_and_one_then_four_is_worse(src):
    base = diagnostics.parse("app.py:1:8: F401 `os` imported but unused\napp.py:9: error: Name \"x\" already "
                             "defined on line 3  [no-redef]\n", src)
    moved = diagnostics.parse("app.py:5:8: F401 `os` imported but unused\napp.py:12: error: Name \"x\" already "
                              "defined on line 6  [no-redef]\n", src)
    assert diagnostics.worse(moved, base) == []
    four = diagnostics.parse("\n".join(f"app.py:{n}:8: F401 `os` imported but unused" for n in range(4)), src)
    assert diagnostics.worse(four, base) == ["app.py: [F401] `os` imported but unused"] * 3


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_junit_of_each_runner_family(tmp_path):
    jest = write(tmp_path, "jest.xml", """<testsuites name="jest tests"><testsuite name="calc">
      <testcase classname="calc adds two words" name="calc adds two words" file="./calc.test.js">
        <failure message="expected">x</failure></testcase>
      <testcase classname="calc adds" name="calc adds" file="./calc.test.js"/></testsuite></testsuites>""")
    surefire = write(tmp_path, "TEST-com.x.CalcTest.xml", """<testsuite name="com.x.CalcTest" tests="2">
      <testcase name="adds" classname="com.x.CalcTest"/>
      <testcase name="knownBug" classname="com.x.CalcTest"><error type="java.lang.AssertionError"/></testcase>
      <testcase name="later" classname="com.x.CalcTest"><skipped/></testcase></testsuite>""")
    gotest = write(tmp_path, "go.xml", """<testsuites><testsuite name="example.com/m" tests="1">
      <testcase classname="m" name="TestAdd/two_words"><failure message="Failed">add_test.go:9</failure>
      </testcase></testsuite></testsuites>""")
    report = junit.read([jest, surefire, gotest])
    assert report.failing == ["calc adds two words::calc adds two words", "com.x.CalcTest::knownBug",
                              "m::TestAdd/two_words"]
    assert "com.x.CalcTest::later" in report.skipped and "com.x.CalcTest::later" not in report.ran
    assert "com.x.CalcTest::adds" in report.ran


def test_node_cases_of_one_name_in_two_files_are_two_tests(tmp_path):
    """Node's junit reporter names every case's class "test" and no file: a failure that moves from
    a.test.js's "adds" to b.test.js's "adds" is a new failure, not the base's."""
    def node_report(name: str, fails: int) -> Path:
        cases = ["<testcase name=\"adds\" classname=\"test\"%s</testcase>"
                 % ("><failure message=\"1 == 2\"/>" if i == fails else ">") for i in (1, 2)]
        return write(tmp_path, name, "<testsuites>" + "".join(cases) + "</testsuites>")

    base, after = junit.read([node_report("base.xml", 1)]), junit.read([node_report("after.xml", 2)])
    assert base.failing == ["test::adds"] and after.failing == ["test::adds (2)"]
    verdict = judge(result(1, after.failing, sorted(after.ran)), result(1, base.failing, sorted(base.ran)))
    assert (verdict.outcome, verdict.new_failures) == (FAILED, ["test::adds (2)"])
    again = junit.read([node_report("r1.xml", 1), node_report("r2.xml", 1)])  # across files: a rerun
    assert again.failing == ["test::adds"]


def test_junit_pytest_ids_come_from_the_file_when_the_report_names_it(tmp_path):
    report = junit.read([write(tmp_path, "p.xml", """<testsuites><testsuite name="pytest">
      <testcase classname="tests.test_x.TestA" name="test_b[two words]" file="tests/test_x.py" line="3"/>
      <testcase classname="" name="tests.test_y"><error message="collection failure">E</error></testcase>
      </testsuite></testsuites>""")])
    assert report.ran == ["tests/test_x.py::TestA::test_b[two words]"]
    assert report.failing == ["tests.test_y"] and not report.only_collection_errors


def test_a_report_of_only_collection_errors_ran_nothing(tmp_path):
    report = junit.read([write(tmp_path, "p.xml", """<testsuites><testsuite name="pytest">
      <testcase classname="" name="tests.test_y"><error message="collection failure">E</error></testcase>
      </testsuite></testsuites>""")])
    assert report.only_collection_errors


def test_not_junit_and_an_xml_bomb_are_report_errors(tmp_path):
    with pytest.raises(junit.ReportError, match="not a JUnit XML report"):
        junit.read([write(tmp_path, "a.xml", "this is not xml")])
    with pytest.raises(junit.ReportError, match="its root is <html>"):
        junit.read([write(tmp_path, "b.xml", "<html/>")])
    bomb = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
            '<testsuites><testcase name="&lol2;"/></testsuites>')
    with pytest.raises(junit.ReportError):
        junit.read([write(tmp_path, "c.xml", bomb)])


@pytest.mark.parametrize("line, runner", [
    ("python -m pytest -q", "pytest"), ("pytest", "pytest"), (".venv/bin/pytest tests/", "pytest"),
    ("cd app && py.test", "pytest"), ("python3 -m unittest discover", "unittest"),
    ("/usr/bin/python3.11 -m unittest -v tests.test_x", "unittest"), ("npm test", ""),
    ("ruff check .", ""), ("echo pytester", ""),
])
def test_runner_detection(line, runner):
    assert runner_of(line) == runner


def result(exit_code: int, failing: list[str] | None, ran: list[str] | None = None, kind: str = JUNIT,
           skipped: list[str] | None = None) -> CheckResult:
    return CheckResult("cmd", exit_code, 0.1, "", failing=failing, kind=kind, ran=ran, skipped=skipped or [])


def test_verdicts():
    base = result(1, ["a::bug"], ["a::bug", "a::ok"])
    assert judge(result(0, None, ["a::bug", "a::ok"]), base).outcome == PASSED
    assert judge(result(1, ["a::bug"], ["a::bug", "a::ok"]), base).outcome == NO_WORSE
    worse = judge(result(1, ["a::bug", "a::ok"], ["a::bug", "a::ok"]), base)
    assert (worse.outcome, worse.new_failures) == (FAILED, ["a::ok"])
    gone = judge(result(0, None, ["a::ok"]), base)
    assert (gone.outcome, gone.removed_tests) == (FAILED, ["a::bug (removed)"])
    skipped = judge(result(0, None, ["a::ok"], skipped=["a::bug"]), base)
    assert skipped.removed_tests == ["a::bug (skipped)"]
    assert judge(result(0, None, ["a::ok"]), base, allow_removed_tests=True).outcome == PASSED
    # no report on the ticket's failing run, when the base had one: cannot be compared
    assert judge(result(1, None, None, kind=""), base).outcome == FAILED
    # a timed-out run never passes
    late = result(1, ["a::bug"], ["a::bug", "a::ok"])
    late.timed_out = True
    assert judge(late, base).outcome == FAILED


def test_eslints_default_stylish_output_is_read_under_its_files_path(src):
    out = (f"\n{src}/web/a.js\n  1:7   error    'a' is assigned a value but never used  no-unused-vars\n"
           "  3:1   warning  Unexpected console statement                 no-console\n"
           "  5:10  error    Parsing error: Unexpected token\n\n"
           "✖ 3 problems (2 errors, 1 warning)\n")
    assert sorted(diagnostics.parse(out, src)) == [
        "web/a.js: Parsing error: Unexpected token", "web/a.js: [no-console] Unexpected console statement",
        "web/a.js: [no-unused-vars] 'a' is assigned a value but never used"]


def test_beside_tests_a_linters_problem_with_a_column_counts_a_test_runners_line_does_not(src):
    """In a test run's output only what a test runner cannot print is a lint problem: a code, or a
    line AND column at the start of a line (go vet, gcc, clang); pytest's `app.py:5: AssertionError`,
    a warning's, Ruby's `x:2: warning`, Node's and Go's indented frames are not."""
    out = ("app.py:5: AssertionError\n"
           "app.py:3: DeprecationWarning: old\n"
           "    main.go:8: known bug\n"  # go test's own failure line: indented
           f"    at Object.<anonymous> ({src}/web/a.js:5:3)\n"  # a Node stack frame
           "./main.go:6:2: fmt.Printf format %d has arg \"a\" of wrong type string\n"  # go vet
           "x.c:3:9: error: 'y' undeclared (first use in this function)\n"  # gcc
           "x.c:3:9: note: each undeclared identifier is reported only once\n"
           "web/b.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n")
    assert sorted(diagnostics.beside_tests(out, src)) == [
        "main.go: fmt.Printf format %d has arg \"a\" of wrong type string",
        "web/b.ts: [TS2322] Type 'string' is not assignable to type 'number'.",
        "x.c: 'y' undeclared (first use in this function)"]
