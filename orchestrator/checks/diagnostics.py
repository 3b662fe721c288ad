"""Read the problems a linter, type checker or compiler prints, one per line, into identities
a check is compared by: (path, code, message) with the line and column left out, so a problem
that only moved is the same problem and 1 problem then 4 is worse.

The forms read (each as the tool prints it by default or with the flag named):
- `path:line[:col]: [CODE] message`: ruff, flake8, pylint `--output-format=parseable`, go vet,
  gcc/clang, clippy `--message-format=short`, eslint `--format unix` (`... [Error/rule]`);
- `path:line: severity: message  [code]`: mypy;
- `  path:line:col - severity: message (rule)`: pyright;
- `path(line,col): error TS1234: message`: tsc `--pretty false`;
- a header line then ` --> path:line:col`: rustc, clippy, and ruff's default output.

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
_SEVERITY = re.compile(r"^(?P<sev>error|warning|fatal error|note|info|information|help)\s*:\s*", re.I)
_LEAD_CODE = re.compile(r"^(?P<code>[A-Z]{1,4}\d{2,5})\b(?:\s*\[\*\])?\s*")  # ruff/flake8 F401, pylint C0114
_TS_CODE = re.compile(r"^(?:error |warning )?(?P<code>TS\d+):\s*")
_TRAIL_CODE = re.compile(r"\s*[\[(](?P<code>(?:Error/|Warning/)?[-\w./@]+)[\])]\s*$")
_LINE_REF = re.compile(r"\b(line|lines|col|column)\s+\d+", re.I)
_SKIPPED_SEVERITIES = ("note", "help", "info", "information")  # they explain a problem already counted
CODED = re.compile(r"^[^\s].*?: \[[^\]]+\] ")  # an identity with a tool's code: `calc.py: [F401] ...`


def parse(output: str, cwd: Path) -> Counter[str]:
    """The problems in `output`, counted by identity `path: [code] message`."""
    found: Counter[str] = Counter()
    root = cwd.resolve()
    header = ""
    for raw in output.splitlines():
        line = raw.rstrip()
        arrow = _ARROW.match(line)
        m: re.Match[str] | None
        if arrow and header:
            m, rest = arrow, header
        else:
            m = _COLON.match(line) or _PYRIGHT.match(line) or _TSC.match(line)
            if line and not line[0].isspace() and not m:
                header = line
            if not m:
                continue
            rest = m.group("rest")
        path = _relative(m.group("path"), root)
        if path is None:
            continue
        ident = _identity(path, rest)
        if ident is not None:
            found[ident] += 1
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


__all__ = ["CODED", "parse", "worse"]
