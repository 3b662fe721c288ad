"""rspec (Ruby): every example's outcome from rspec's JSON report.

rspec reads extra options from the `SPEC_OPTS` environment variable, so `rspec`, `bin/rspec`,
`bundle exec rspec` and `rake spec` (whose task runs rspec in a child process that inherits the
environment) are all asked the same way, the command line untouched. SPEC_OPTS gains `--require
rspec_report.rb`, which adds the JSON formatter beside the run's own: a `--format json` in SPEC_OPTS
would replace the formatters of the command line and of `.rspec`, and the output the middle agent
reads would be gone.

An example's identity is its file and full description (`spec/calc_spec.rb::Calc add numbers`), not
its line number or rspec's `[1:2]` id: an unrelated edit above an example moves its line and
an example added before it renumbers the ids, and either would read as a removed test and a new
one. A file that fails to load stops rspec before any example runs: that is a collection error,
as pytest's; `No examples found.` is a report with no tests (the run cannot really run).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from orchestrator.checks import junit

RUNNER = "rspec"
REQUIRE = Path(__file__).with_name("rspec_report.rb")
# `rspec`, `bin/rspec`, `bundle exec rspec`; `rake spec` (`bundle exec rake spec`) runs rspec too
_COMMAND = re.compile(r"(?:(?:^|(?<=[\s;&|(/]))rspec|(?:^|(?<=[\s;&|(]))rake\s+spec)(?=\s|$|;|&|\||\))")
# rspec's own words for a command line it does not take
_CANNOT = re.compile(r"^(invalid option: \S+|missing argument: \S+|invalid argument: .+)$", re.M)
_ID = re.compile(r"\[(\d+(?::\d+)*)\]$")  # rspec's scoped id: `./spec/x_spec.rb[1:2]`
_STATUS = {"passed": junit.PASSED, "failed": junit.FAILED}  # pending: skipped


def detects(line: str) -> bool:
    return bool(_COMMAND.search(line))


def prepare(line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    """The line (as it is), the environment that asks for the report, and where it goes."""
    report = tmp / "rspec.json"
    # `--no-fail-fast`: SPEC_OPTS outrank the line and `.rspec`, so a `--fail-fast` there no longer
    # stops both runs at a failure the base already has, before an example the ticket breaks
    opts = " ".join(filter(None, [environ.get("SPEC_OPTS", ""), f"--require {shlex.quote(str(REQUIRE))}",
                                  "--no-fail-fast"]))
    return line, {"SPEC_OPTS": opts, "MIDDLE_RSPEC_JSON": str(report)}, [str(report)]


def cannot_run(exit_code: int, output: str) -> str | None:
    found = _CANNOT.search(output)
    return f"rspec: {found.group(1)}" if found else None


def read(paths: list[Path]) -> junit.JUnitReport:
    """The examples of rspec's JSON reports."""
    report = junit.JUnitReport()
    for path in paths:
        data = _load(path)
        for case in junit.numbered(_cases(data, path.name)):  # a description repeated in one file
            report.add(case)
        summary = data.get("summary")
        summary = summary if isinstance(summary, dict) else {}
        outside = summary.get("errors_outside_of_examples_count")
        if isinstance(outside, int) and outside > 0:  # a spec file that did not load (rspec then runs none)
            messages = [str(m).strip() for m in data.get("messages") or [] if str(m).strip()]
            lines = [ln.strip() for ln in (messages[0].splitlines() if messages else []) if ln.strip()]
            first = lines[0] if lines else f"{outside} error(s)"  # "An error occurred while loading ./x_spec.rb."
            why = " ".join(ln for ln in lines[1:] if not ln.startswith("#"))  # the error, not its backtrace
            report.add(junit.TestCase(f"(outside of examples) {first}"[:300], junit.FAILED, why[:300], True))
    return report


def _load(path: Path) -> dict[str, Any]:
    text = ""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        if not text.strip():  # the formatter opens its file when rspec starts and fills it at the end
            raise junit.ReportError("rspec's JSON report is empty: rspec stopped before reporting its "
                                    "examples") from None
        raise junit.ReportError(f"{path.name} is not rspec's JSON report ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
        raise junit.ReportError(f"{path.name} is not rspec's JSON report (no examples list)")
    return data


def _cases(data: dict[str, Any], name: str) -> list[junit.TestCase]:
    """The examples in the order they are defined, not run: `--order random` (often in a project's
    .rspec) runs them in another order each time, and two examples with one description are
    numbered in this order (`... (2)`), so the base's and the ticket's runs name them alike."""
    keyed: list[tuple[tuple[int, ...], junit.TestCase]] = []
    for example in data["examples"]:
        if not isinstance(example, dict):
            raise junit.ReportError(f"{name}: an example is not an object")
        file = str(example.get("file_path") or "").removeprefix("./")
        exception = example.get("exception")
        message = str(exception.get("message") or "") if isinstance(exception, dict) else ""
        first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
        case = junit.TestCase(f"{file}::{example.get('full_description') or example.get('description') or ''}",
                              _STATUS.get(str(example.get("status")), junit.SKIPPED), first[:300])
        keyed.append((_defined(example), case))
    return [case for _, case in sorted(keyed, key=lambda kc: kc[0])]  # stable: same keys keep the run's order


def _defined(example: dict[str, Any]) -> tuple[int, ...]:
    """Where an example is defined, for ordering: rspec's id `./spec/x_spec.rb[1:2:3]` (its place
    among its group's examples and groups, by definition, whatever the run's order; two examples a
    loop defines on one line differ there), else its line."""
    found = _ID.search(str(example.get("id") or ""))
    if found:
        return tuple(int(n) for n in found.group(1).split(":"))
    line = example.get("line_number")
    return (line,) if isinstance(line, int) else ()


__all__ = ["REQUIRE", "RUNNER", "cannot_run", "detects", "prepare", "read"]
