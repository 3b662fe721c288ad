"""A failing run's output normalised (orchestrator/checks/output_lines.py) for `baseline =
"exit-code"`: the same failure on the base and on the ticket prints the same lines once each run's
noise is left out, on real runners' outputs (pytest, go test, cargo test) run in two folders, as the
base's worktree and the ticket's are; a new failure is a new line. And which changed paths are
tests or runner config (orchestrator/checks/touched_tests.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.checks.output_lines import new_lines, normalise
from orchestrator.checks.touched_tests import in_source, may_hold_tests, spans, which_are_tests

PY_TEST = ("def test_known_bug():\n    assert 1 == 2\n\n\ndef test_adds():\n    assert 1 + 2 == {}\n\n\n"
           "def test_slow():\n    import time\n    time.sleep(0.01)\n")
GO_TEST = ('package calc\n\nimport "testing"\n\nfunc TestKnownBug(t *testing.T) {\n\tt.Fatal("known bug")\n}\n\n'
           'func TestAdds(t *testing.T) {\n\tif 1+2 != %s {\n\t\tt.Fatal("adds")\n\t}\n}\n')
RS_LIB = ("#[cfg(test)]\nmod tests {\n    #[test]\n    fn known_bug() {\n        assert_eq!(1, 2);\n    }\n"
          "    #[test]\n    fn adds() {\n        assert_eq!(1 + 2, %s);\n    }\n}\n")


def _runs(tmp_path: Path, files: dict[str, str], cmd: list[str], env: dict[str, str] | None = None,
          expected: str = "3") -> tuple[list[str] | None, list[str] | None, list[str] | None]:
    """The normalised output of the base, of a harmless ticket and of a breaking one, each in its own folder."""
    import os

    outs = []
    for name, value in (("base", expected), ("harmless", expected), ("breaks", "4")):
        folder = tmp_path / name
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text.replace("{}", value).replace("%s", value))
        if name == "harmless":
            (folder / "NOTES.md").write_text("notes\n")
        run = subprocess.run(cmd, cwd=folder, capture_output=True, text=True,
                             env={**os.environ, **(env or {}), "CARGO_TARGET_DIR": str(folder / "target")})
        assert run.returncode != 0, run.stdout + run.stderr
        outs.append(normalise(run.stdout + run.stderr, str(folder)))
    return outs[0], outs[1], outs[2]


def test_pytest_fails_the_same_on_two_folders_and_a_new_failure_is_a_new_line(tmp_path: Path):
    base, harmless, breaks = _runs(tmp_path, {"test_calc.py": PY_TEST},
                                   [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--durations=3"])
    assert new_lines(harmless, base) == []
    new = new_lines(breaks, base) or []
    assert any("FAILED test_calc.py::test_adds" in line for line in new), new


def test_go_test_fails_the_same_on_two_folders(tmp_path: Path):
    if shutil.which("go") is None:
        pytest.skip("go is not installed (.ci/run installs it)")
    env = {"GOFLAGS": "-mod=mod -v", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    base, harmless, breaks = _runs(tmp_path, {"go.mod": "module example.com/calc\n\ngo 1.19\n",
                                              "calc_test.go": GO_TEST}, ["go", "test", "-count=1", "./..."], env)
    assert new_lines(harmless, base) == []
    assert "--- FAIL: TestAdds (<time>)" in (new_lines(breaks, base) or [])


def test_cargo_test_fails_the_same_on_two_folders_whatever_its_build_hash_and_thread_ids(tmp_path: Path):
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed (.ci/run installs it)")
    base, harmless, breaks = _runs(tmp_path, {"Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\n'
                                              'edition = "2021"\n', "src/lib.rs": RS_LIB},
                                   ["cargo", "test", "--no-fail-fast"], {"CARGO_NET_OFFLINE": "true"})
    assert new_lines(harmless, base) == []
    assert "test tests::adds ... FAILED" in (new_lines(breaks, base) or [])


def test_what_changes_on_every_run_is_left_out_and_counts_are_kept():
    one = normalise("\x1b[31mFAIL\x1b[0m adds at 0x7f3a12 (pid 4242) 2026-11-29T04:31:23Z took 12ms\n"
                    "  /tmp/middle-check-abc/x.json\nRan 3 tests in 0.012s\n\n", "/work/a")
    two = normalise("FAIL adds at 0x55aa01 (pid 17) 2026-11-30 05:00:01 took 9 ms\n/tmp/other/y.json\n"
                    "Ran 3 tests in 1.5s\n", "/work/b")
    assert one == two == ["FAIL adds at <addr> (<pid>) <date> took <time>", "<tmp>", "Ran 3 tests in <time>"]
    assert new_lines(["Ran 4 tests in <time>"], ["Ran 3 tests in <time>"]) == ["Ran 4 tests in <time>"]
    # ordering is noise: the same lines in another order are no new line; a line printed more often is
    assert new_lines(["b", "a", "a"], ["a", "b"]) == ["a"] and new_lines(["b", "a"], ["a", "b"]) == []
    assert new_lines(None, ["a"]) is None and normalise("x\n" * 6000) is None


def test_pytest_durations_rows_are_timing_not_outcome():
    # a loaded machine lists a test the quiet base run hid as too fast: no new line either way
    quiet = normalise("===== slowest 3 durations =====\n\n(3 durations < 0.005s hidden.  Use -vv to show these "
                      "durations.)\n===== 1 failed, 1 passed in 0.02s =====\n")
    loaded = normalise("===== slowest 3 durations =====\n0.01s call     test_calc.py::test_adds\n\n"
                       "(2 durations < 0.005s hidden.  Use -vv to show these durations.)\n"
                       "===== 1 failed, 1 passed in 0.31s =====\n")
    assert new_lines(loaded, quiet) == [] and new_lines(quiet, loaded) == []
    # the outcome line's counts are still kept
    assert new_lines(normalise("===== 2 failed in 0.3s =====\n"), quiet) == ["===== 2 failed in <time> ====="]


@pytest.mark.parametrize("path, counts", [
    ("tests/test_api.py", True), ("test_calc.py", True), ("pkg/calc_test.go", True), ("src/a.spec.ts", True),
    ("test/calc.test.js", True), ("spec/calc_spec.rb", True), ("t/basic.t", True), ("conftest.py", True),
    ("Makefile", True), ("tox.ini", True), ("pyproject.toml", True), ("package.json", True),
    ("vitest.config.mjs", True), (".mocharc.yml", True), ("Cargo.toml", True), ("check.py", True),
    ("src/tests.rs", True), ("calc.py", False), ("src/lib.rs", False), ("NOTES.md", False), ("latest/calc.js", False),
])
def test_which_changed_paths_are_tests_or_runner_config(path: str, counts: bool):
    assert (which_are_tests([path], "python check.py && make lint") == [path]) is counts
    assert which_are_tests(["app.py"], "ruff check --no-cache app.py") == []  # a target, not the runner


def test_a_new_test_module_does_not_count_a_new_conftest_or_config_does() -> None:
    changed = ["calc.py", "tests/test_new.py", "tests/conftest.py", "tests/__init__.py", "tests/test_old.py"]
    added = ["tests/test_new.py", "tests/conftest.py", "tests/__init__.py"]
    assert which_are_tests(changed, "make test", added) == ["tests/__init__.py", "tests/conftest.py",
                                                            "tests/test_old.py"]
    assert which_are_tests(changed, "make test") == sorted(changed[1:])
    # the check's own script, new, is still the runner
    assert which_are_tests(["check_test.py"], "python check_test.py", ["check_test.py"]) == ["check_test.py"]


def _diff(path: str, before: str, after: str | None, context: int = 3) -> str:
    """A file's diff as git writes it (difflib's unified format, git's a/ b/ prefixes)."""
    import difflib

    return "".join(difflib.unified_diff(before.splitlines(True), (after or "").splitlines(True), f"a/{path}",
                                        f"b/{path}" if after is not None else "/dev/null", n=context))


RS = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n" \
     "    fn adds() {\n        assert_eq!(super::add(1, 2), 3);\n    }\n}\n"
# a test whose attribute, char, string, raw string and comments hold braces
RS_BRACES = ("#[test]\n#[should_panic(expected = \"}\")]\nfn braces() {\n    let c = '}'; let s = r#\"{\"#;\n"
             "    /* } /* nested } */ */ // }\n    assert!(s.len() > 0);\n    let _ = (c, '\\'');\n}\n"
             "pub fn after() {}\n")
RS_DOC = "/// ```\n/// assert_eq!(calc::add(1, 2), 3);\n/// ```\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
PY_DOCS = 'def add(a, b):\n    """Add.\n\n    >>> add(1, 2)\n    3\n    >>> add(2, 2)\n    4\n    """\n'
PY_DOC = 'def add(a, b):\n    """Add.\n\n    >>> add(1, 2)\n    3\n    """\n    return a + b\n'


@pytest.mark.parametrize("path, before, after, counts", [
    # a test removed, or disabled, inside a source file: seen from the diff's hunks, not the name
    ("src/lib.rs", RS, RS.replace("    #[test]\n    fn adds() {\n        assert_eq!(super::add(1, 2), 3);\n"
                                  "    }\n", ""), True),
    ("src/lib.rs", RS, RS.replace("#[test]\n", "#[test]\n    #[ignore]\n"), True),
    ("src/lib.rs", RS, RS.split("#[cfg(test)]")[0], True),  # the whole test module
    ("src/lib.rs", RS, None, True),  # the file deleted
    ("calc.py", PY_DOC, PY_DOC.replace("    >>> add(1, 2)\n    3\n", ""), True),
    ("calc.py", PY_DOC, PY_DOC.replace(">>> add(1, 2)", ">>> add(1, 2)  # doctest: +SKIP"), True),
    # code only added or changed beside them: still a fix
    ("src/lib.rs", RS, RS.replace("a + b", "b + a"), False),
    ("src/lib.rs", RS, RS.replace("#[cfg(test)]", "pub fn one() -> i32 {\n    1\n}\n\n#[cfg(test)]"), False),
    ("src/lib.rs", RS, RS.replace("mod tests {\n", "mod tests {\n    #[test]\n    fn more() {}\n\n"), False),
    ("calc.py", PY_DOC, PY_DOC.replace("return a + b", "return b + a"), False),
    # a removed line that starts like a header (`-- `) is read as the hunk's, not as a new file
    ("q.py", "-- x\n>>> 1\n", "-- y\n>>> 1\n", False),
    # a test's body edited on lines with no marker: seen against the base file (touched_tests.spans)
    ("src/lib.rs", RS, RS.replace("assert_eq!(super::add(1, 2), 3);", "assert!(true);"), True),
    ("src/lib.rs", RS, RS.replace("fn adds() {\n", "fn adds() {\n        return;\n"), True),
    ("src/lib.rs", RS, RS.replace("mod tests {\n", "mod tests {\n    use super::*;\n"), False),  # added between
    ("src/lib.rs", RS, RS.replace("    }\n}\n", "    }\n\n    #[test]\n    fn more() {\n        x();\n    }\n}\n"),
     False),  # a new test after the last one (its closing brace the same as the one above it)
    ("src/lib.rs", RS_BRACES, RS_BRACES.replace("assert!(s.len() > 0);", "assert!(true);"), True),
    ("src/lib.rs", RS_BRACES, RS_BRACES.replace("pub fn after() {}", "pub fn after() { let _ = 1; }"), False),
    ("src/lib.rs", RS_DOC, RS_DOC.replace("add(1, 2), 3", "add(1, 2), add(1, 2)"), True),  # a doc-test's code
    ("calc.py", PY_DOC, PY_DOC.replace("    3\n", "    4\n"), True),  # its expected output
    ("calc.py", PY_DOC, PY_DOC.replace("    3\n", "    3\n    4\n"), True),
    ("calc.py", PY_DOCS, PY_DOCS.replace("    3\n", "    3\n    5\n"), True),  # before the next example
    ("calc.py", PY_DOCS, PY_DOCS.replace("    3\n", "    3\n    >>> 1\n    1\n"), False),  # a new example
    ("calc.py", PY_DOC, PY_DOC.replace('    """Add.\n', '    """Add them.\n'), False),  # its prose
])
def test_a_test_removed_disabled_or_edited_inside_a_source_file_counts_from_the_diff(path, before, after, counts):
    bases = {path: before}
    for context in (0, 3):  # -U0, as the graph asks git, and a diff with context lines
        diff = _diff(path, before, after, context)
        assert (in_source(diff, bases) == [path]) is counts, diff
        assert (which_are_tests([path, "NOTES.md"], "sh check.sh", diff=diff, bases=bases) == [path]) is counts
        assert which_are_tests(["NOTES.md"], "sh check.sh", diff=diff) == []  # only a file the ticket changed


def test_a_test_span_is_read_past_braces_in_strings_and_comments():
    assert [(s.first, s.last, s.body) for s in spans("src/lib.rs", RS_BRACES)] == [(1, 8, True)]
    assert [(s.first, s.last) for s in spans("calc.py", PY_DOCS)] == [(4, 6), (6, 8)]  # to the line ending each


def test_the_diff_is_read_of_source_files_not_of_those_counted_by_name():
    assert may_hold_tests(["src/lib.rs", "calc.py", "tests/test_calc.py", "NOTES.md", "Cargo.toml", "a.go",
                           "docs/usage.rst"]) == ["NOTES.md", "calc.py", "docs/usage.rst", "src/lib.rs"]
    # several files, git's own header lines between them
    diff = ("diff --git a/a.py b/a.py\nindex 1..2 100644\n" + _diff("a.py", "x = 1\n", "x = 2\n")
            + "diff --git a/src/lib.rs b/src/lib.rs\n" + _diff("src/lib.rs", RS, RS.replace("#[test]", "")))
    assert in_source(diff) == ["src/lib.rs"]
