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

Not seen: tests inside a source file (Rust's `#[cfg(test)]` modules, Python doctests), which only
a runner read test by test tells apart (docs/checks.md, "The gate enumerated").
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


def which_are_tests(paths: Iterable[str], command: str = "", added: Iterable[str] = ()) -> list[str]:
    """The paths (relative to the project, `/`-separated) that are tests or runner configuration.
    `added`: those of `paths` new since the base. A new test module adds tests and can neither
    remove nor disable one the base ran, so it does not count (a ticket adding a feature with its
    test stays decidable); a new conftest.py, `__init__.py` or config can, so those do."""
    named = _named_by(command)
    new = set(added)
    found = []
    for path in paths:
        p = PurePosixPath(path)
        if path in new and p.name != "conftest.py" and _TEST_NAMES.match(p.name) and str(p) not in named:
            continue
        if (str(p) in named or _TEST_NAMES.match(p.name) or _CONFIG_NAMES.match(p.name)
                or any(part in _TEST_FOLDERS for part in p.parts[:-1])
                or (p.parts[:1] == (".cargo",) and p.name.startswith("config"))):
            found.append(path)
    return sorted(found)


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


__all__ = ["which_are_tests"]
