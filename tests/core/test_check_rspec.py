"""rspec read example by example (orchestrator/checks/runners/rspec.py): which lines run it, how
SPEC_OPTS asks for its JSON report, how the report reads, and, with the real rspec, that the run's
own formatter is kept. Also: a runner that stops before writing its report is told in its terms."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from orchestrator.checks import junit
from orchestrator.checks.instrument import cannot_run, prepare, runner_of
from orchestrator.checks.runner import run_check
from orchestrator.checks.runners import rspec
from orchestrator.config.settings import CheckCommand

needs_rspec = pytest.mark.skipif(shutil.which("rspec") is None, reason="rspec is not installed (.ci/run installs it)")


@pytest.mark.parametrize("line, runner", [
    ("rspec", "rspec"), ("bundle exec rspec spec/models", "rspec"), ("bin/rspec --fail-fast", "rspec"),
    ("rake spec", "rspec"), ("bundle exec rake spec && rubocop", "rspec"),
    ("rspecs", ""), ("rake", ""), ("rake specs", ""), ("ruby test/x_test.rb", ""),
])
def test_which_lines_run_rspec(line, runner):
    assert runner_of(line) == runner


def test_spec_opts_gains_the_formatters_require_the_users_own_kept(tmp_path):
    p = prepare(CheckCommand(run="bundle exec rspec"), tmp_path / "t d", {"SPEC_OPTS": "--order defined"})
    assert p.line == "bundle exec rspec" and p.runner == "rspec"  # the command line untouched
    assert shlex.split(p.env["SPEC_OPTS"]) == ["--order", "defined", "--require", str(rspec.REQUIRE), "--no-fail-fast"]
    assert p.env["MIDDLE_RSPEC_JSON"] == str(tmp_path / "t d" / "rspec.json") == p.reports[0]
    assert rspec.REQUIRE.is_file()
    # configured otherwise: as the user says
    assert prepare(CheckCommand(run="rspec", format="exit-code"), tmp_path, {}).env == {}


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def example(file: str, full: str, status: str, message: str = "") -> dict[str, object]:
    ex: dict[str, object] = {"id": f"{file}[1:1]", "description": full.split()[-1], "full_description": full,
                             "status": status, "file_path": file, "line_number": 3}
    if message:
        ex["exception"] = {"class": "RSpec::Expectations::ExpectationNotMetError", "message": message}
    return ex


def test_examples_by_file_and_full_description_pending_skipped_repeats_numbered(tmp_path):
    report = rspec.read([write(tmp_path / "r.json", {"examples": [
        example("./spec/a_spec.rb", "A works", "passed"),
        example("./spec/a_spec.rb", "A breaks", "failed", "\nexpected: 2\n     got: 1\n"),
        example("./spec/a_spec.rb", "A breaks", "passed"),
        example("./spec/b_spec.rb", "A works", "pending"),
    ], "summary": {"errors_outside_of_examples_count": 0}})])
    assert report.failing == ["spec/a_spec.rb::A breaks"]
    assert report.ran == ["spec/a_spec.rb::A breaks", "spec/a_spec.rb::A breaks (2)", "spec/a_spec.rb::A works"]
    assert report.skipped == ["spec/b_spec.rb::A works"]
    assert report.cases["spec/a_spec.rb::A breaks"].message == "expected: 2"


def test_a_file_that_does_not_load_is_a_collection_error(tmp_path):
    report = rspec.read([write(tmp_path / "r.json", {"examples": [], "messages": [
        "\nAn error occurred while loading ./spec/x_spec.rb.\nFailure/Error: raise 'boom'\n\nRuntimeError:\n  boom\n"
        "# ./spec/x_spec.rb:1:in `<top (required)>'\n"], "summary": {"errors_outside_of_examples_count": 1}})])
    assert report.only_collection_errors
    assert report.failing == ["(outside of examples) An error occurred while loading ./spec/x_spec.rb."]
    assert report.first_collection_error().endswith("Failure/Error: raise 'boom' RuntimeError: boom")


@pytest.mark.parametrize("text, says", [
    ("not json", "is not rspec's JSON report"), ('{"testResults": []}', "no examples list"),
    ('{"examples": [1]}', "an example is not an object"),
])
def test_a_report_that_is_not_rspecs_json_is_a_report_error(tmp_path, text, says):
    (tmp_path / "r.json").write_text(text)
    with pytest.raises(junit.ReportError, match=says):
        rspec.read([tmp_path / "r.json"])


def test_rspecs_own_words_for_a_command_line_it_does_not_take():
    assert cannot_run(1, "invalid option: --nosuch\n\nPlease use --help", "rspec") == "rspec: invalid option: --nosuch"
    assert cannot_run(1, "3 examples, 1 failure\n", "rspec") is None


SPEC = "RSpec.describe('A') { it('works') { expect(1).to eq(1) }; it('breaks') { expect(1).to eq(2) } }\n"


@needs_rspec
@pytest.mark.parametrize("dot_rspec, printed", [
    ("--format documentation\n", "  breaks (FAILED - 1)"),
    ("--order defined\n", ".F"),  # no formatter of its own: rspec's default, progress
])
def test_the_runs_own_formatter_still_prints(tmp_path, dot_rspec, printed):
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "a_spec.rb").write_text(SPEC)
    (tmp_path / ".rspec").write_text(dot_rspec)
    r = run_check("rspec", tmp_path, timeout_s=60)
    assert r.failing == ["spec/a_spec.rb::A breaks"]
    assert r.ran == ["spec/a_spec.rb::A breaks", "spec/a_spec.rb::A works"]
    assert printed in r.tail.splitlines()


@needs_rspec
def test_a_runner_that_stops_before_its_report_is_told_in_its_own_terms(tmp_path):
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "a_spec.rb").write_text("RSpec.describe('A') { it('exits') { Process.exit!(3) } }\n")
    r = run_check("rspec", tmp_path, timeout_s=60)
    assert r.problem == "rspec's JSON report is empty: rspec stopped before reporting its examples"


def test_jest_that_stops_before_its_report_is_told_so_not_of_a_junit_report(tmp_path):
    if shutil.which("jest") is None:
        pytest.skip("jest is not installed (.ci/run installs it)")
    (tmp_path / "jest.config.js").write_text("throw new Error('a broken config');\n")
    (tmp_path / "a.test.js").write_text("test('a', () => {});\n")
    r = run_check("jest --ci", tmp_path, timeout_s=60)
    assert r.problem == ("jest's JSON report (--json --outputFile) was not written: it stopped before reporting "
                         "its tests")


@needs_rspec
def test_same_named_examples_keep_their_ids_under_random_order(tmp_path):
    """`--order random` (a project's .rspec often says so) runs examples in another order each run:
    two examples with one description are numbered in the order they are defined, not run, so the
    failing one is the same id whatever the seed (else base and ticket would swap them)."""
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "calc_spec.rb").write_text(
        "RSpec.describe 'Calc' do\n"
        + "".join(f"  it('adds') {{ expect({n}).to eq({n if n != 3 else 0}) }}\n" for n in range(1, 7))
        + "  [7, 8].each { |n| it('loops') { expect(n).to eq(7) } }\nend\n")
    seen = set()
    for seed in (1, 2, 3, 4, 5, 6):
        r = run_check(f"rspec --order random --seed {seed}", tmp_path, timeout_s=60)
        assert r.problem is None and r.ran is not None and len(r.ran) == 8, r.tail
        seen.add(tuple(r.failing or []))
    assert seen == {("spec/calc_spec.rb::Calc adds (3)", "spec/calc_spec.rb::Calc loops (2)")}
