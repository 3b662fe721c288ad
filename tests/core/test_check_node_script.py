"""A test file run by plain node (orchestrator/checks/runners/node_script.py): its records are the
project's own output, so a corrupt one is a clear error naming it; each file is one test by its exit
code, each console.assert call one test by its message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.checks import junit
from orchestrator.checks.runner import JUNIT, CheckResult
from orchestrator.checks.runners import node_script
from orchestrator.checks.verdict import FAILED, NO_WORSE, UNDECIDED, judge


def _record(folder: Path, pid: int, data: object) -> Path:
    path = folder / f"node-script-{pid}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_corrupt_record_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "node-script-7.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(junit.ReportError, match="node-script-7.json"):
        node_script.read([bad])
    wrong = _record(tmp_path, 8, {"file": 3, "code": "x"})
    with pytest.raises(junit.ReportError, match="node-script-8.json"):
        node_script.read([wrong])


def test_each_file_by_its_exit_code_and_each_console_assert_by_its_message(tmp_path: Path) -> None:
    paths = [_record(tmp_path, 1, {"file": "test/a.js", "code": 0,
                                   "asserts": [["adds", True], ["adds", False], ["", True], ["bad", "yes"]]}),
             _record(tmp_path, 2, {"file": "test/b.js", "code": 1}),
             _record(tmp_path, 3, {"file": "test/b.js", "code": 0})]  # run twice: failing in one run fails
    report = node_script.read(paths)
    assert report.failing == ["test/a.js::console.assert: adds (2)", "test/b.js::(node script)"]
    assert report.ran == sorted(["test/a.js::(node script)", "test/a.js::console.assert: adds",
                                 "test/a.js::console.assert: adds (2)", "test/a.js::console.assert: (no message)",
                                 "test/b.js::(node script)"])


def _run(failing: list[str], ran: list[str], exit_code: int = 1) -> CheckResult:
    return CheckResult("npm test", exit_code, 0.1, "", failing=failing, kind=JUNIT, ran=ran, skipped=[],
                       runner="wrapper")


def test_a_file_failing_on_the_base_and_again_is_undecided_unless_another_fails_new() -> None:
    known, adds = "test/known.js::(node script)", "test/adds.js::(node script)"
    base = _run([known], [known, adds])
    same = judge(_run([known], [known, adds]), base, changed=["calc.js"])
    assert same.outcome == UNDECIDED and "`test/known.js`" in same.reason, same
    assert judge(_run([known, adds], [known, adds]), base, changed=["calc.js"]).outcome == FAILED
    # a console.assert failing on both ran all the same: no worse, as any runner's test
    message = "test/index.js::console.assert: known bug"
    base = _run([message], [message, "test/index.js::(node script)"], exit_code=0)
    assert judge(_run([message], list(base.ran or []), exit_code=0), base, changed=["calc.js"]).outcome == NO_WORSE


def test_a_file_failing_on_the_base_that_passes_now_is_a_fix_only_with_no_test_touched() -> None:
    known, adds = "test/known.js::(node script)", "test/adds.js::(node script)"
    base = _run([known], [known, adds])
    now = _run([], [known, adds], exit_code=0)
    now.failing = None
    assert judge(now, base, changed=["calc.js"]).outcome == "passed"
    touched = judge(now, base, changed=["test/known.js"])
    assert touched.outcome == UNDECIDED and "`test/known.js`" in touched.reason, touched
