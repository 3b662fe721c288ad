"""A test file run by plain `node` (`node test.js`, an `npm test` whose script is `node test/a.js;
node test/b.js`, a Makefile's `node test/*.js`), behind a wrapper: each such file is one test,
`test/a.js::(node script)`, passed or failed by its node process's exit code.

Such a file uses `assert` and throws at its first failing assertion: nothing after it runs, and
nothing names the assertions that passed. So a file is the finest thing that can be told, and
per file is what is compared: a base that already fails in `test/a.js` no longer hides a new
failure in `test/b.js` (failed, naming it), nor a file the ticket removed. What it cannot tell is
the file that fails on the base and again on the ticket: its later assertions ran in neither run,
so whether the ticket broke one is unknown, and the verdict is undecided (verdict.py), never "no
worse". `node_script.cjs`, in NODE_OPTIONS' --require (wrapper.py, Node 20 and later as the others
there), writes one record per node process whose main file is the project's own (not npm, nor a
runner's bin, nor anything in node_modules); a process killed by a signal writes none.
A test file written with `console.assert` (which prints "Assertion failed" and goes on, leaving the
exit code 0) has each call recorded, its message its name: `test/index.js::console.assert: multiple
null`, compared one by one as any runner's tests (every call runs, whatever failed before it).
`node test/*.js` runs only its first file (node takes the others for the script's arguments): that
file is the one test read.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from orchestrator.checks import junit

KIND = "node-script"
PRELOAD = Path(__file__).with_name("node_script.cjs")
REPORT = "node-script-{pid}.json"  # node_script.cjs puts the node process's id in place of {pid}
SUFFIX = "::(node script)"  # a test that is a whole file, read by its exit code


def env(tmp: Path, cwd: Path | None) -> dict[str, str]:
    """The variables node_script.cjs reads: where its records go, and the project's folder."""
    return {"MIDDLE_NODE_SCRIPT_JSON": str(tmp / REPORT),
            "MIDDLE_NODE_SCRIPT_ROOT": str((cwd or Path.cwd()).resolve())}


def read(paths: list[Path]) -> junit.JUnitReport:
    """Each record as one test (a file run twice, failing in either run, fails: wrapper.read)."""
    report = junit.JUnitReport()
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise junit.ReportError(f"{path.name}: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("file"), str) or not isinstance(data.get("code"), int):
            raise junit.ReportError(f"{path.name}: not a record of node_script.cjs")
        ident = data["file"] + SUFFIX
        outcome = junit.PASSED if data["code"] == 0 else junit.FAILED
        seen = report.cases.get(ident)
        if seen is None or outcome == junit.FAILED:
            report.cases[ident] = junit.TestCase(ident, outcome, "" if data["code"] == 0 else f"exit {data['code']}")
        for case in _asserts(data["file"], data.get("asserts")):
            if case.ident not in report.cases or case.outcome == junit.FAILED:
                report.cases[case.ident] = case
    return report


def _asserts(file: str, asserts: object) -> list[junit.TestCase]:
    """Each console.assert call of one run, `file::console.assert: message` (`(2)` for the second
    of the same message, in the order they ran; one with no message is numbered among those)."""
    if not isinstance(asserts, list):
        return []
    cases: list[junit.TestCase] = []
    seen: Counter[str] = Counter()
    for item in asserts:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], bool)):
            continue
        name = f"{file}::console.assert: {item[0] or '(no message)'}"
        seen[name] += 1
        ident = name if seen[name] == 1 else f"{name} ({seen[name]})"
        cases.append(junit.TestCase(ident, junit.PASSED if item[1] else junit.FAILED,
                                    "" if item[1] else "Assertion failed"))
    return cases


def whole_files(names: list[str]) -> list[str]:
    """Those of `names` that are files run by node, judged whole by their exit code."""
    return [n for n in names if n.endswith(SUFFIX)]


__all__ = ["KIND", "PRELOAD", "REPORT", "SUFFIX", "env", "read", "whole_files"]
