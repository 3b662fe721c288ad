"""The check gate enumerated (tests/graph/gate_matrix.py has the table and what each cell must be):
Python, the native runners, bats and a command no reader understands, each on a base that already
fails one test, against six tickets; linters that print no code beside a failing test; one ticket
per runner family through the real graph. The JavaScript and Ruby rows: test_gate_matrix_js.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gate_matrix import (
    BODY_EDITS,
    EXEMPT,
    FAILED,
    GO_CALC,
    GO_FILES,
    GO_TEST,
    NATIVE_ENV,
    NO_WORSE,
    OTHER_ROWS,
    PASSED,
    PY,
    PY_CALC,
    PY_FILES,
    PYTEST,
    ROW,
    ROWS,
    SCENARIOS,
    UNDECIDED,
    UNITTEST,
    Matrix,
    Row,
    _lay_out,
    _missing,
    check_cell,
    covers,
    registered,
)

ROWS_HERE = OTHER_ROWS


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    return Matrix(tmp_path_factory.mktemp("matrix"))


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", ROWS_HERE)
def test_the_gate_on_a_base_that_already_fails_one_test(matrix: Matrix, name: str, scenario: str) -> None:
    check_cell(matrix, name, scenario)


@pytest.mark.parametrize("scenario", ["rewrites", "fixes beside"])
@pytest.mark.parametrize("name", sorted(BODY_EDITS))
def test_a_test_body_edited_on_lines_with_no_marker_is_seen_from_the_base_file(matrix: Matrix, name: str,
                                                                              scenario: str) -> None:
    """A command read by its exit code on a failing base: the failing test's body rewritten to
    pass (an assert, a doctest's expected output) stops the ticket naming the file; code beside
    the tests in the same file changed is a fix."""
    row = ROW[name]
    if (why := _missing(row)) is not None:
        pytest.skip(why)
    result, verdict = matrix.ticket(row, scenario, BODY_EDITS[name][scenario])
    assert result.passed, result.tail
    if scenario == "rewrites":
        assert verdict.outcome == UNDECIDED, verdict
        assert all(f"`{path}`" in verdict.reason for path in BODY_EDITS[name][scenario]), verdict.reason
    else:
        assert verdict.outcome == PASSED, verdict


# -- a linter that prints no code, in one command beside the tests --------------------------------
# `pytest; <linter>` (or a script running both, exiting 1 if either failed): the base already fails
# a test, so the exit code says nothing; a problem the ticket adds must be a failure of its own.

GO_VET_BAD = GO_CALC.replace('package calc\n', 'package calc\n\nimport "fmt"\n') + \
    'func Show() { fmt.Printf("%d\\n", "x") }\n'
C_OK = "int add(int a, int b) { return a + b; }\n"
TS_OK = "export const add = (a: number, b: number): number => a + b;\n"
JS_LINT = "export default [{ rules: { 'no-unused-vars': 'error' } }];\n"
LINTERS: dict[str, tuple[str, tuple[str, ...], dict[str, str], dict[str, str], str]] = {
    # name: (lint command, tools, its files, the ticket's edit that adds a problem, the problem named)
    "go vet": ("go vet ./...", ("go",), {"go.mod": GO_FILES["go.mod"], "calc.go": GO_CALC},
               {"calc.go": GO_VET_BAD}, 'calc.go: fmt.Printf format %d has arg "x" of wrong type string'),
    "gcc": ("gcc -fsyntax-only -Wall lib.c", ("gcc",), {"lib.c": C_OK},
            {"lib.c": C_OK + "int twice(int a) { return a * y; }\n"}, "undeclared (first use in this function)"),
    "clang": ("clang -fsyntax-only -Wall lib.c", ("clang",), {"lib.c": C_OK},
              {"lib.c": C_OK + "int twice(int a) { return a * y; }\n"}, "lib.c: use of undeclared identifier 'y'"),
    "tsc": ("tsc --noEmit lib.ts", ("tsc",), {"lib.ts": TS_OK},
            {"lib.ts": TS_OK + "export const n: number = 'one';\n"}, "lib.ts: [TS2322]"),
    "eslint (stylish)": ("eslint lib.mjs", ("eslint",), {"lib.mjs": "export const one = 1;\n",
                                                         "eslint.config.mjs": JS_LINT},
                         {"lib.mjs": "export const one = 1;\nconst unused = 2;\n"}, "lib.mjs: [no-unused-vars]"),
    "ruff": (f"{PY} -m ruff check -q --no-cache calc.py", (), {}, {"calc.py": "import os\n" + PY_CALC},
             "calc.py: [F401]"),
}


@pytest.mark.parametrize("linter", list(LINTERS))
def test_a_problem_a_linter_prints_beside_a_known_failing_test_is_the_tickets(matrix: Matrix, linter: str) -> None:
    lint, tools, files, adds, named = LINTERS[linter]
    script = f"{UNITTEST}; s=$?\n{lint} || s=1\nexit $s\n"
    row = Row(f"lint {linter}", "sh check.sh", {**PY_FILES, **files, "check.sh": script},
              {"harmless": {"NOTES.md": "notes\n"}, "lints": dict(adds)}, tools, env=NATIVE_ENV)
    if (why := _missing(row)) is not None:
        pytest.skip(why)
    _, verdict = matrix.ticket(row, "harmless")
    assert verdict.outcome == NO_WORSE and "known" in verdict.note(), (verdict, matrix.base(row).tail)
    result, verdict = matrix.ticket(row, "lints")
    assert verdict.outcome == FAILED, (verdict, result.tail)
    assert any(named in n for n in verdict.new_failures), (verdict.new_failures, result.tail)


def test_a_go_test_a_ticket_breaks_beside_a_known_failing_pytest_test_is_named(matrix: Matrix) -> None:
    """A script running pytest then go test, exiting 1 if either failed: the base already fails a
    Python test, so its exit code says nothing of the Go tests; go's own failure lines do."""
    go_ok = {"go.mod": GO_FILES["go.mod"], "calc.go": GO_CALC.replace("Value = 1", "Value = 2"),
             "calc_test.go": GO_TEST}
    row = Row("script>pytest+go test", "sh check.sh",
              {**PY_FILES, **go_ok, "check.sh": f"{PYTEST}; s=$?\ngo test ./... || s=1\nexit $s\n"},
              {"harmless": {"NOTES.md": "notes\n"}, "breaks": {"calc.go": go_ok["calc.go"].replace("a + b", "a * b")}},
              ("go",), env=NATIVE_ENV)
    if (why := _missing(row)) is not None:
        pytest.skip(why)
    _, verdict = matrix.ticket(row, "harmless")
    assert verdict.outcome == NO_WORSE, verdict
    assert verdict.already_failing == ["test_calc.py::TestCalc::test_known_bug"], verdict
    result, verdict = matrix.ticket(row, "breaks")
    assert verdict.outcome == FAILED and verdict.new_failures == ["example.com/calc::TestAdds"], (verdict, result.tail)


# -- through the real graph: one row per runner family, on the offline model ---------------------

@pytest.mark.parametrize("name, scenario", [
    ("make>unittest", "harmless"), ("npm test>mocha", "harmless"), ("rake spec", "crashes"),
    ("go test", "removes"), ("exit code", "harmless"),
    # the files the ticket changed, from its worktree's git (checking._changed): a fix touching no
    # test passes, a removed test is undecided
    ("exit code", "fixes"), ("exit code", "removes"),
    # a doctest removed from the module it is in: seen in the diff of the worktree against its base
    ("exit code>doctest", "removes"), ("exit code>doctest", "fixes"),
    # its expected output edited: seen in the diff (-U0) read against the base commit's file
    ("exit code>doctest", "rewrites"),
    # the same on a Rust test's body (`assert_eq!` rewritten to `assert!(true)`), through real cargo
    # and git: undecided naming src/lib.rs; code beside the tests in src/lib.rs changed: a fix
    ("exit code>cargo test", "rewrites"), ("exit code>cargo test", "fixes beside"),
])
def test_the_graph_ends_each_family_as_its_verdict_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                       scenario: str) -> None:
    """The graph adds the base measured on a fresh worktree, the stored note and the ticket's end:
    the verdict the table above asserts is the ticket's."""
    from test_gate_projects import assert_failed, assert_no_worse, run_ticket

    row = ROW[name]
    if (why := _missing(row)) is not None:
        pytest.skip(why)
    for key, value in row.env.items():
        monkeypatch.setenv(key, value)
    edits = row.edits.get(scenario) or BODY_EDITS[name][scenario]
    r = run_ticket(tmp_path, row.files, [row.command], lambda cwd: _lay_out(cwd, edits))
    expected = row.leaks.get(scenario, NO_WORSE if scenario == "harmless" else PASSED if scenario == "fixes"
                             else PASSED if scenario == "fixes beside" else UNDECIDED if scenario == "rewrites"
                             else FAILED)
    if expected == PASSED:
        assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed", r["outcome"].reason
    elif expected == NO_WORSE:
        assert_no_worse(r)
        assert "known" in r["run"]["check_note"].lower(), r["run"]["check_note"]
    elif expected == UNDECIDED:  # stopped at once, its work kept, saying why and the ways out
        reason = r["outcome"].reason
        assert r["outcome"].status == "failed" and r["run"]["check_status"] == "failed", reason
        assert r["final"]["outcome"] == UNDECIDED and r["outcome"].corrections == 0, r["final"]
        assert "cannot be judged" in reason and "--despite-check" in reason and "middle feedback" in reason, reason
        if scenario in ("removes", "rewrites"):  # naming the file the test was in
            assert all(path in reason for path in edits), reason
        assert r["run"]["head_commit"], "the work is committed on its branch"
    else:
        assert_failed(r)


@pytest.mark.parametrize("added, expected", [
    ({"test_more.py": "def test_more():\n    assert True\n"}, PASSED),  # a new test module adds, never removes
    ({"conftest.py": "collect_ignore = ['test_calc.py']\n"}, UNDECIDED),  # a new conftest can disable tests
])
def test_a_fix_read_by_exit_code_that_adds_a_test_module_passes_one_adding_a_conftest_is_undecided(
        tmp_path: Path, added: dict[str, str], expected: str) -> None:
    """The common ticket, a fix with its own new test, stays decidable on a base that already
    fails and a command read by its exit code; a new file that can remove a test does not."""
    from test_gate_projects import run_ticket

    row = ROW["exit code"]
    edits = {**row.edits["fixes"], **added}
    r = run_ticket(tmp_path, row.files, [row.command], lambda cwd: _lay_out(cwd, edits))
    if expected == PASSED:
        assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed", r["outcome"].reason
    else:
        assert r["outcome"].status == "failed" and r["final"]["outcome"] == UNDECIDED, r["final"]
        assert "conftest.py" in r["outcome"].reason, r["outcome"].reason


def test_every_runner_middle_reads_has_its_rows(tmp_path: Path) -> None:
    """Each reader middle registers (taken from the code: gate_matrix.registered) has a row with
    the six tickets on a failing base, or an exemption saying why: a runner, wrapper or format
    added to the product later without rows fails here."""
    covered: dict[str, list[str]] = {}
    for row in ROWS:
        assert set(SCENARIOS) <= set(row.edits), f"{row.name}: no ticket for {set(SCENARIOS) - set(row.edits)}"
        for key in covers(row, tmp_path):
            covered.setdefault(key, []).append(row.name)
    known = registered()
    missing = sorted(known - set(covered) - set(EXEMPT))
    assert not missing, f"no gate matrix row (nor exemption) for: {missing}"
    # an exemption for a reader that has rows, or that is no longer registered, is out of date
    assert not set(EXEMPT) & set(covered), sorted(set(EXEMPT) & set(covered))
    assert set(EXEMPT) <= known, sorted(set(EXEMPT) - known)
    assert {"runner:pytest", "runner:cargo", "behind:uvu", "wrapper:tox", "format:tap"} <= known  # read from the code


def test_the_base_text_of_the_changed_files_is_read_by_one_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ticket touching 200 source files: their base text is read by one `git cat-file --batch`,
    not a `git show` each (the real git, counted through a PATH entry that logs, then runs it)."""
    import os
    import shutil

    from orchestrator.graph.checking import _changed
    from orchestrator.testing import make_repo
    from orchestrator.workspace.git import out

    files = {f"src/m{n}.py": f"def f{n}():\n    return {n}\n" for n in range(200)}
    repo = make_repo(tmp_path / "repo", {**files, "src/gone.py": "X = 1\n"})
    base = out(repo, "rev-parse", "HEAD")
    for n in range(200):
        (repo / f"src/m{n}.py").write_text(f"def f{n}():\n    return {n + 1}\n")
    (repo / "src/gone.py").unlink()
    (repo / "src/new.py").write_text("Y = 2\n")
    log = tmp_path / "gits.log"
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("git")} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}:{os.environ['PATH']}")
    changed = _changed({"workspace": {"path": str(repo), "base_commit": base}})
    assert changed is not None
    paths, added, diff, texts = changed
    assert len(paths) == 202 and added == ["src/new.py"] and "-    return 0" in diff
    assert len(texts) == 201 and texts["src/m7.py"] == files["src/m7.py"] and texts["src/gone.py"] == "X = 1\n"
    calls = log.read_text().splitlines()
    assert len(calls) == 4 and sum("cat-file --batch" in c for c in calls) == 1, calls
