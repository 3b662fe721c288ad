"""Which of a ticket's changed files are tests or the test runner's configuration: the files through
which a ticket can remove or disable a test without a reader that lists every test noticing
(orchestrator.checks.verdict: a check that failed on the base and passes on the ticket, read by
its exit code, is a fix only when the ticket touched none of them).

From the runners' own conventions, one list for all (a file counts if any runner would take it):

- a folder a runner looks in for tests: `tests/`, `test/`, `spec/`, `__tests__/`, `testing/`,
  `testdata/`, `t/` (prove), `e2e/`, at any depth;
- a test file by its name: `test_*.py`, `*_test.py`, `conftest.py`, `*_test.go`, `*.test.js` and
  `*.spec.ts` (any JavaScript or TypeScript extension), `*_spec.rb`, `*_test.rb`, `*.bats`, `*.t`;
- a runner's or a wrapper's configuration: Makefile (`*.mk`), justfile, tox.ini/tox.toml,
  noxfile.py, pytest.ini, setup.cfg, pyproject.toml (pytest's, hatch's, coverage's sections),
  package.json (its scripts), jest/vitest/vite/mocha/karma/playwright configs, `.mocharc.*`,
  `.rspec`, Rakefile, Cargo.toml, `.cargo/config*`;
- a file the check command itself names (`python check.py`, `sh scripts/test.sh`): the command's
  own script is its runner.

A test inside a source file (Rust's `#[test]` functions and `#[cfg(test)]` modules in `src/*.rs`,
Python doctests in a docstring) is seen from the ticket's diff against its base, not the file's name
(`in_source`): a file counts when a line the diff removes or changes holds a test's marker
(`#[test]`, `#[cfg(test)]`, `#[ignore]`, `#[should_panic]`, `>>> `, `doctest`), or a line it adds
disables one (`#[ignore]`, `# doctest: +SKIP`). A ticket that only adds code stays a fix. Not seen:
a test's body edited on lines without a marker (a doctest's expected output, an assert in a
`#[test]` fn), nor test code in other languages' source files (Elixir's doctests).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import PurePosixPath

_TEST_FOLDERS = {"test", "tests", "spec", "specs", "__tests__", "testing", "testdata", "t", "e2e"}
_JS = r"(?:js|mjs|cjs|jsx|ts|mts|cts|tsx)"
_TEST_NAMES = re.compile(rf"^(?:test_.*\.py|.*_test\.py|conftest\.py|.*_test\.go|.*\.(?:test|spec)\.{_JS}"
                         r"|.*_spec\.rb|.*_test\.rb|.*\.bats|.*\.t)$")
_CONFIG_NAMES = re.compile(rf"^(?:(?:GNU)?[Mm]akefile|.*\.mk|[Jj]ustfile|\.justfile|tox\.ini|tox\.toml|noxfile\.py"
                           r"|pytest\.ini|setup\.cfg|pyproject\.toml|package\.json|\.rspec|Rakefile|Cargo\.toml"
                           rf"|(?:jest|vitest|vite|karma|playwright|mocha)\.config\.{_JS}|\.mocharc(?:\.\w+)?"
                           r"|karma\.conf\.js)$")


def which_are_tests(paths: Iterable[str], command: str = "", added: Iterable[str] = (), diff: str = "") -> list[str]:
    """The paths (relative to the project, `/`-separated) that are tests or runner configuration.
    `added`: those of `paths` new since the base. A new test module adds tests and can neither
    remove nor disable one the base ran, so it does not count (a ticket adding a feature with its
    test stays decidable); a new conftest.py, `__init__.py` or config can, so those do. `diff`: the
    ticket's diff against its base of its changed source files (`may_hold_tests`): those whose
    hunks remove or disable test code count too (`in_source`)."""
    named = _named_by(command)
    new = set(added)
    paths = list(paths)
    found = sorted(set(in_source(diff)) & set(paths))
    for path in paths:
        p = PurePosixPath(path)
        if path in new and p.name != "conftest.py" and _TEST_NAMES.match(p.name) and str(p) not in named:
            continue
        if (str(p) in named or _TEST_NAMES.match(p.name) or _CONFIG_NAMES.match(p.name)
                or any(part in _TEST_FOLDERS for part in p.parts[:-1])
                or (p.parts[:1] == (".cargo",) and p.name.startswith("config"))):
            found.append(path)
    return sorted(set(found))


# Where a test can live in a source file: Rust's test functions and modules, Python's doctests
# (in a module's docstrings, or a text file pytest's --doctest-glob reads)
_SOURCE = re.compile(r"\.(?:rs|py|pyi|rst|md|txt)$")
# a test's marker on a line the ticket removes or changes: that test is gone or different
_REMOVED = re.compile(r"#\[(?:test|ignore|should_panic|cfg\(test\))\b|#\[tokio::test\b|>>> |doctest")
# a marker on a line the ticket adds that disables a test
_DISABLING = re.compile(r"#\[ignore\b|doctest:\s*\+SKIP")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def may_hold_tests(paths: Iterable[str]) -> list[str]:
    """The changed files whose diff `in_source` reads: source files a test can live in, not those
    counted by their name already."""
    paths = list(paths)
    named = set(which_are_tests(paths))
    return sorted(p for p in paths if p not in named and _SOURCE.search(p))


def in_source(diff: str) -> list[str]:
    """The files of a unified diff (`git diff BASE -- files`) whose hunks remove or change a line
    holding a test's marker, or add one that disables a test. Hunks are read by their line counts,
    so a removed line that itself starts with `--`/`++` is not taken for a file header."""
    found: set[str] = set()
    old_path = path = ""
    old_left = new_left = 0
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk
            tag, text = line[:1], line[1:]
            if tag == "-":
                old_left -= 1
                if _REMOVED.search(text):
                    found.add(path)
            elif tag == "+":
                new_left -= 1
                if _DISABLING.search(text):
                    found.add(path)
            elif tag == " " or line == "":
                old_left, new_left = old_left - 1, new_left - 1
            continue  # `\ No newline at end of file`
        if line.startswith("--- "):
            old_path = _header_path(line[4:], "a/")
        elif line.startswith("+++ "):
            new = _header_path(line[4:], "b/")
            path = new if new != "/dev/null" else old_path  # a deleted file is named by its old side
        elif (hunk := _HUNK.match(line)) and path:
            old_left = int(hunk.group(1)) if hunk.group(1) is not None else 1
            new_left = int(hunk.group(2)) if hunk.group(2) is not None else 1
    return sorted(found)


def _header_path(text: str, prefix: str) -> str:
    """The path of a `---`/`+++` line: git's prefix off, a tab-separated date (difflib) off."""
    text = text.split("\t", 1)[0].rstrip()
    if text.startswith('"') and text.endswith('"'):  # git quotes a name with unusual characters
        text = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode(
            "utf-8", "replace")
    return text.removeprefix(prefix)


_INTERPRETER = re.compile(r"^(?:python[\d.]*|sh|bash|zsh|dash|node|deno|bun|ruby|perl|php|tsx|ts-node)$")
_SEGMENTS = re.compile(r"&&|\|\||[;|&]")


def _named_by(command: str) -> set[str]:
    """The scripts a check command runs (`python check.py`, `sh scripts/test.sh`, `./run-tests`):
    each segment's program, or an interpreter's script; not its other arguments (`ruff check
    app.py` checks app.py, which is no test)."""
    found: set[str] = set()
    for segment in _SEGMENTS.split(command):
        try:
            words = shlex.split(segment)
        except ValueError:
            words = segment.split()
        words = [w for w in words if not re.match(r"^\w+=", w)]  # `FOO=1 ./test.sh`
        if not words:
            continue
        program = words[0]
        name = PurePosixPath(program).name
        if _INTERPRETER.match(name):
            rest = words[1:]
            inline = ("-m", "-c") if name.startswith("python") else ("-c",) if name.endswith("sh") else ("-e", "--eval")
            if rest and rest[0] in inline:
                continue  # a module or inline code: no file of the project's
            program = next((w for w in rest if not w.startswith("-")), "")
        if program and ("/" in program or "." in program):
            found.add(str(PurePosixPath(program.removeprefix("./"))))
    return found


__all__ = ["in_source", "may_hold_tests", "which_are_tests"]
