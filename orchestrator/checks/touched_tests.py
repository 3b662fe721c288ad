"""Which of a ticket's changed files are tests or the test runner's configuration: the files through
which a ticket can remove or disable a test without a reader that lists every test noticing
(orchestrator.checks.verdict: a check that failed on the base and passes on the ticket, read by
its exit code, is a fix only when the ticket touched none of them).

From the runners' own conventions, one list for all (a file counts if any runner would take it):

- a folder a runner looks in for tests: `tests/`, `test/`, `spec/`, `__tests__/`, `testing/`,
  `testdata/`, `t/` (prove), `e2e/`, at any depth;
- a test file by its name: `test_*.py`, `*_test.py`, `conftest.py`, `*_test.go`, `*.test.js` and
  `*.spec.ts` (any JavaScript or TypeScript extension), `*_spec.rb`, `*_test.rb`, `*.bats`, `*.t`,
  `tests.rs` (a Rust test module in a file of its own: `#[cfg(test)] mod tests;`);
- a runner's or a wrapper's configuration: Makefile (`*.mk`), justfile, tox.ini/tox.toml,
  noxfile.py, pytest.ini, setup.cfg, pyproject.toml (pytest's, hatch's, coverage's sections),
  package.json (its scripts), jest/vitest/vite/mocha/karma/playwright configs, `.mocharc.*`,
  `.rspec`, Rakefile, Cargo.toml, `.cargo/config*`;
- a file the check command itself names (`python check.py`, `sh scripts/test.sh`): the command's
  own script is its runner.

A test inside a source file (Rust's `#[test]` functions and `#[cfg(test)]` modules in `src/*.rs`,
its doc-tests' code blocks, Python doctests in a docstring or a text file) is seen from the ticket's
diff against its base, not the file's name (`in_source`): a file counts when a line the diff removes
or changes holds a test's marker (`#[test]`, `#[cfg(test)]`, `#[ignore]`, `#[should_panic]`, `>>> `,
`doctest`), or a line it adds disables one (`#[ignore]`, `# doctest: +SKIP`), or, read against the
base file's text (`spans`), a line it removes or changes lies inside a test: a `#[test]` fn from its
attributes to its closing brace, a `#[cfg(test)]` item (a `mod tests { ... }` block), a ```` ``` ````
block of a `///`/`//!` doc comment, a doctest example (its `>>> `/`... ` lines and its expected
output up to a blank line, the next example or the docstring's end). Lines added inside a test fn,
a doc-test block or an example (an early `return`, another expected line) count too; those added
between the tests of a test module (a new test) do not, nor a new doctest example. A ticket that
only adds code, or changes code outside the tests, stays a fix. Not seen: test code in other
languages' source files (Elixir's doctests).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

_TEST_FOLDERS = {"test", "tests", "spec", "specs", "__tests__", "testing", "testdata", "t", "e2e"}
_JS = r"(?:js|mjs|cjs|jsx|ts|mts|cts|tsx)"
_TEST_NAMES = re.compile(rf"^(?:test_.*\.py|.*_test\.py|conftest\.py|.*_test\.go|.*\.(?:test|spec)\.{_JS}"
                         r"|.*_spec\.rb|.*_test\.rb|.*\.bats|.*\.t|tests\.rs)$")
_CONFIG_NAMES = re.compile(rf"^(?:(?:GNU)?[Mm]akefile|.*\.mk|[Jj]ustfile|\.justfile|tox\.ini|tox\.toml|noxfile\.py"
                           r"|pytest\.ini|setup\.cfg|pyproject\.toml|package\.json|\.rspec|Rakefile|Cargo\.toml"
                           rf"|(?:jest|vitest|vite|karma|playwright|mocha)\.config\.{_JS}|\.mocharc(?:\.\w+)?"
                           r"|karma\.conf\.js)$")


def which_are_tests(paths: Iterable[str], command: str = "", added: Iterable[str] = (), diff: str = "",
                    bases: Mapping[str, str] | None = None) -> list[str]:
    """The paths (relative to the project, `/`-separated) that are tests or runner configuration.
    `added`: those of `paths` new since the base. A new test module adds tests and can neither
    remove nor disable one the base ran, so it does not count (a ticket adding a feature with its
    test stays decidable); a new conftest.py, `__init__.py` or config can, so those do. `diff`: the
    ticket's diff against its base of its changed source files (`may_hold_tests`): those whose
    hunks remove or disable test code count too (`in_source`); `bases`: those files' text on the
    base commit, where the tests' spans are read."""
    named = _named_by(command)
    new = set(added)
    paths = list(paths)
    found = sorted(set(in_source(diff, bases)) & set(paths))
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
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def may_hold_tests(paths: Iterable[str]) -> list[str]:
    """The changed files whose diff `in_source` reads: source files a test can live in, not those
    counted by their name already."""
    paths = list(paths)
    named = set(which_are_tests(paths))
    return sorted(p for p in paths if p not in named and _SOURCE.search(p))


def in_source(diff: str, bases: Mapping[str, str] | None = None) -> list[str]:
    """The files of a unified diff (`git diff BASE -- files`, any context) whose hunks remove or
    change a line holding a test's marker, or add one that disables a test, or (with `bases`, each
    file's text on the base commit) remove or change a line inside a test, or add lines inside a
    test's body (`spans`). Hunks are read by their line counts, so a removed line that itself starts
    with `--`/`++` is not taken for a file header."""
    found: set[str] = set()
    old_path = path = ""
    old_left = new_left = 0
    old_no = 0  # the base's number of the next line the hunk removes or keeps
    tests = _Tests([], [])
    added: list[str] = []  # a run of added lines, all before base line `old_no`
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk
            tag, text = line[:1], line[1:]
            if tag != "+" and added:
                if tests.changed_by(old_no, added):
                    found.add(path)
                added = []
            if tag == "-":
                old_left -= 1
                if _REMOVED.search(text) or tests.hold(old_no):
                    found.add(path)
                old_no += 1
            elif tag == "+":
                new_left -= 1
                added.append(text)
                if _DISABLING.search(text):
                    found.add(path)
            elif tag == " " or line == "":
                old_left, new_left = old_left - 1, new_left - 1
                old_no += 1
            continue  # `\\ No newline at end of file`
        if added:  # the hunk ended on added lines
            if tests.changed_by(old_no, added):
                found.add(path)
            added = []
        if line.startswith("--- "):
            old_path = _header_path(line[4:], "a/")
        elif line.startswith("+++ "):
            new = _header_path(line[4:], "b/")
            path = new if new != "/dev/null" else old_path  # a deleted file is named by its old side
            base = (bases or {}).get(old_path)
            tests = _Tests(spans(old_path, base), base.split("\n")) if base is not None else _Tests([], [])
        elif (hunk := _HUNK.match(line)) and path:
            old_left = int(hunk.group(2)) if hunk.group(2) is not None else 1
            new_left = int(hunk.group(3)) if hunk.group(3) is not None else 1
            # `-K,0` (nothing removed): the lines are added after line K
            old_no = int(hunk.group(1)) + (1 if old_left == 0 else 0)
    if added and tests.changed_by(old_no, added):
        found.add(path)
    return sorted(found)


@dataclass(frozen=True)
class Span:
    """A test's lines in the base file, `first` to `last` (1-based, inclusive). `body`: lines added
    inside it change the test (a fn's body, an example's output); a test module's are new tests.
    `example`: a doctest example, where added lines that begin with `>>> ` are a new example."""

    first: int
    last: int
    body: bool = True
    example: bool = False

    def holds(self, line: int) -> bool:
        return self.first <= line <= self.last

    def takes(self, before: int, added: list[str]) -> bool:
        """Whether lines added before base line `before` go inside this test's body."""
        if not (self.body and self.first < before <= self.last):
            return False
        return not (self.example and _PS1.match(added[0]))


@dataclass(frozen=True)
class _Tests:
    """One file's tests (`spans`) and its base lines."""

    spans: list[Span]
    lines: list[str]

    def hold(self, line: int) -> bool:
        return any(span.holds(line) for span in self.spans)

    def changed_by(self, before: int, added: list[str]) -> bool:
        """Whether `added`, inserted before base line `before`, goes inside a test's body wherever
        the diff could have put it: a run whose last line is the line above it (a new test after
        another's closing brace) slides up, one whose first is the line below slides down, and git
        may show either; it counts only when every place it could be is inside a test."""
        if not self.spans:
            return False
        places = [(before, added)]
        up, run = before, added
        while up > 1 and _same(run[-1], self.lines[up - 2]):
            up, run = up - 1, [run[-1], *run[:-1]]
            places.append((up, run))
        down, run = before, added
        while down <= len(self.lines) and _same(run[0], self.lines[down - 1]):
            down, run = down + 1, [*run[1:], run[0]]
            places.append((down, run))
        return all(any(span.takes(at, lines) for span in self.spans) for at, lines in places)


def _same(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


def spans(path: str, text: str) -> list[Span]:
    """The tests inside a source file's text: Rust's by its items, the others' doctest examples."""
    lines = text.split("\n")  # git's lines: not str.splitlines, which also splits at \f and others
    return _rust_spans(lines) if path.endswith(".rs") else _doctest_spans(lines)


_RUST_TEST = re.compile(r"^\s*#\[\s*(?:(?:\w+::)*test|cfg\s*\(\s*test\s*\))\s*[\](]")
_RUST_ATTRIBUTE = re.compile(r"^\s*#\[")
_RUST_DOC_FENCE = re.compile(r"^\s*//[/!]\s*```")


def _rust_spans(lines: list[str]) -> list[Span]:
    found: list[Span] = []
    text = "\n".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    fence: int | None = None
    for i, line in enumerate(lines):
        if _RUST_DOC_FENCE.match(line):  # a doc-test: from its opening fence to its closing one
            if fence is None:
                fence = i
            else:
                found.append(Span(fence + 1, i + 1))
                fence = None
        if not _RUST_TEST.match(line):
            continue
        first = i
        while first > 0 and _RUST_ATTRIBUTE.match(lines[first - 1]):  # the test's other attributes
            first -= 1
        end = _rust_item_end(text, starts[i])
        last = len(lines) - 1 if end is None else text.count("\n", 0, end)
        found.append(Span(first + 1, last + 1, body="cfg" not in line.split("]", 1)[0]))
    return found


_RAW_STRING = re.compile(r'b?r(#*)"')


def _rust_item_end(text: str, pos: int) -> int | None:
    """Where the Rust item whose attribute starts at `pos` ends: the brace that closes its body, or
    a `;` before any (`#[cfg(test)] mod tests;`). Strings, characters and comments are skipped, so
    a brace inside them is not counted; None when it never closes (the file is not valid Rust)."""
    depth = 0
    i, n = pos, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if text.startswith("/*", i):
            i = _block_comment_end(text, i)
            continue
        raw = _RAW_STRING.match(text, i)
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = text.find('"' + raw.group(1), raw.end())
            i = n if close < 0 else close + 1 + len(raw.group(1))
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "'":
            if text.startswith("\\", i + 1):  # '\n', '\'', '\u{..}'
                close = text.find("'", i + 3)
                i = n if close < 0 else close + 1
            else:
                i += 3 if i + 2 < n and text[i + 2] == "'" else 1  # 'x', or a lifetime's '
            continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0 and c == "}":
                return i
        elif c == ";" and depth == 0:
            return i
        i += 1
    return None


def _block_comment_end(text: str, i: int) -> int:
    """Past the `/* ... */` at `i` (Rust's nest)."""
    depth, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


_PS1 = re.compile(r"^\s*>>>(?:\s|$)")
_PS2 = re.compile(r"^\s*\.\.\.(?:\s|$)")
_QUOTES = ('"""', "'''")


def _doctest_spans(lines: list[str]) -> list[Span]:
    """Each doctest example: its `>>> ` line and `... ` lines, its expected output up to a blank
    line, the next example or a docstring's closing quotes, and the line that ends it."""
    found: list[Span] = []
    i, n = 0, len(lines)
    while i < n:
        if not _PS1.match(lines[i]):
            i += 1
            continue
        first = i
        i += 1
        while i < n and _PS2.match(lines[i]):
            i += 1
        while i < n:
            stripped = lines[i].strip()
            if not stripped or _PS1.match(lines[i]) or stripped.startswith(_QUOTES):
                break
            if any(q in stripped for q in _QUOTES):  # output, then the docstring's end
                break
            i += 1
        # the line that ends it is in it: a blank line or closing quotes removed, or a line added
        # before it or before the next example's `>>> `, changes the output it expects
        last = min(i, n - 1)
        found.append(Span(first + 1, last + 1, example=True))
        i = last if i < n and _PS1.match(lines[i]) else last + 1
    return found


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


__all__ = ["Span", "in_source", "may_hold_tests", "spans", "which_are_tests"]
