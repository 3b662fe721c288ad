"""Read the problems a linter, type checker or compiler prints, one per line, into identities
a check is compared by: (path, code, message) with the line and column left out, so a problem
that only moved is the same problem and 1 problem then 4 is worse.

The forms read (each as the tool prints it by default or with the flag named):
- `path:line[:col]: [CODE] message`: ruff, flake8, pylint `--output-format=parseable`, go vet,
  gcc/clang, clippy `--message-format=short`, eslint `--format unix` (`... [Error/rule]`);
- `path:line: severity: message  [code]`: mypy;
- `  path:line:col - severity: message (rule)`: pyright;
- `path(line,col): error TS1234: message`: tsc `--pretty false`;
- a header line then ` --> path:line:col`: rustc, clippy, and ruff's default output;
- a file's path alone on a line, then `  line:col  severity  message  rule` under it: eslint's
  default (stylish) output.

A line counts only when its path is a file under the check's folder, so a traceback's
`File "x.py", line 3` or a log line with a colon and a number is not taken for a problem.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

_COLON = re.compile(r"^(?P<path>[^\s:(][^:(]*?):(?P<line>\d+)(?::(?P<col>\d+))?:\s*(?P<rest>\S.*)$")
_PYRIGHT = re.compile(r"^\s+(?P<path>[^\s:][^:]*?):(?P<line>\d+):(?P<col>\d+) - (?P<rest>(?:error|warning): .*)$")
_TSC = re.compile(r"^(?P<path>[^\s(][^(]*?)\((?P<line>\d+),(?P<col>\d+)\): (?P<rest>\S.*)$")
# rustc, clippy and ruff's default output: a header line (`F401 [*] message`, `warning: message`),
# then ` --> path:line:col` under it
_ARROW = re.compile(r"^\s*--> (?P<path>[^\s:][^:]*?):(?P<line>\d+)(?::(?P<col>\d+))?\s*$")
# eslint's stylish output: the file's path on its own line, then its problems indented under it
_STYLISH = re.compile(r"^\s+(?P<line>\d+):(?P<col>\d+)\s+(?P<sev>error|warning)\s+(?P<msg>\S.*?)"
                      r"(?:\s{2,}(?P<rule>[-\w./@]+))?\s*$")
_SEVERITY = re.compile(r"^(?P<sev>error|warning|fatal error|note|info|information|help)\s*:\s*", re.I)
_LEAD_CODE = re.compile(r"^(?P<code>[A-Z]{1,4}\d{2,5})\b(?:\s*\[\*\])?\s*")  # ruff/flake8 F401, pylint C0114
_TS_CODE = re.compile(r"^(?:error |warning )?(?P<code>TS\d+):\s*")
_TRAIL_CODE = re.compile(r"\s*[\[(](?P<code>(?:Error/|Warning/)?[-\w./@]+)[\])]\s*$")
_LINE_REF = re.compile(r"\b(line|lines|col|column)\s+\d+", re.I)
_SKIPPED_SEVERITIES = ("note", "help", "info", "information")  # they explain a problem already counted
CODED = re.compile(r"^[^\s].*?: \[[^\]]+\] ")  # an identity with a tool's code: `calc.py: [F401] ...`


def parse(output: str, cwd: Path) -> Counter[str]:
    """The problems in `output`, counted by identity `path: [code] message`."""
    return Counter(ident for ident, _ in _problems(output, cwd))


def beside_tests(output: str, cwd: Path) -> list[str]:
    """The problems a linter, type checker or compiler printed in a test run's output, those a test
    runner's own lines cannot be: with a tool's code (ruff's F401, mypy's [arg-type], tsc's TS2322,
    eslint's rule), or at a line AND column (go vet's `./calc.go:7:2: ...`, gcc's and clang's
    `x.c:3:9: error: ...`). A runner's `tests/test_x.py:5: AssertionError`, a warning's `x.py:3:
    DeprecationWarning`, Ruby's `calc.rb:2: warning` name no column; Node's, jest's and Go's
    `file:line:col` frames are indented or in parentheses, never at the start of a line."""
    return [ident for ident, column in _problems(output, cwd) if column or CODED.match(ident)]


def _problems(output: str, cwd: Path) -> list[tuple[str, bool]]:
    """Each problem's identity, and whether its line named a column."""
    found: list[tuple[str, bool]] = []
    root = cwd.resolve()
    header = ""
    stylish: str | None = None  # the file eslint's stylish lines are under
    for raw in output.splitlines():
        line = raw.rstrip()
        styled = _STYLISH.match(line) if stylish else None
        if styled and stylish:
            if styled.group("rule"):
                found.append((f"{stylish}: [{styled.group('rule')}] {' '.join(styled.group('msg').split())}", True))
            else:
                found.append((f"{stylish}: {' '.join(styled.group('msg').split())}", True))
            continue
        arrow = _ARROW.match(line)
        m: re.Match[str] | None
        if arrow and header:
            m, rest = arrow, header
        else:
            m = _COLON.match(line) or _PYRIGHT.match(line) or _TSC.match(line)
            if line and not line[0].isspace() and not m:
                header = line
                # a path alone on its line (eslint prints it absolute): not every line is looked up
                stylish = _relative(line, root) if len(line) < 1024 and (line[0] in "/." or " " not in line) else None
            if not m:
                continue
            rest = m.group("rest")
        path = _relative(m.group("path"), root)
        if path is None:
            continue
        ident = _identity(path, rest)
        if ident is not None:
            found.append((ident, m.groupdict().get("col") is not None))
    return found


def _relative(path: str, root: Path) -> str | None:
    """The path relative to the check's folder when it names a file there, else None."""
    p = Path(path.strip())
    try:
        full = (p if p.is_absolute() else root / p).resolve()
        rel = full.relative_to(root)
    except (ValueError, OSError):
        return None
    return rel.as_posix() if full.is_file() else None


def _identity(path: str, rest: str) -> str | None:
    code = ""
    sev = _SEVERITY.match(rest)
    if sev:
        if sev.group("sev").lower() in _SKIPPED_SEVERITIES:
            return None
        rest = rest[sev.end():]
    lead = _LEAD_CODE.match(rest) or _TS_CODE.match(rest)
    if lead:
        code, rest = lead.group("code"), rest[lead.end():]
    trail = _TRAIL_CODE.search(rest)
    if trail and not code:
        code, rest = trail.group("code"), rest[:trail.start()]
    message = " ".join(_LINE_REF.sub(lambda m: f"{m.group(1)} N", rest).split())
    return f"{path}: [{code}] {message}" if code else f"{path}: {message}"


def worse(now: Counter[str], base: Counter[str]) -> list[str]:
    """The problems `now` has more of than `base`: each identity as often as it is new."""
    return sorted((now - base).elements())


__all__ = ["CODED", "beside_tests", "parse", "worse"]
