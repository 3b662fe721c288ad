"""rspec (Ruby) judged example by example with no configuration: SPEC_OPTS requires middle's
formatter, which writes rspec's JSON report beside the run's own output
(orchestrator/checks/runners/rspec.py). Through the real graph, store, git worktrees and the real
rspec (`.ci/run` installs Debian's ruby-rspec; a test skips only when rspec is not installed), on a
project with one example already failing on the base.
"""

from __future__ import annotations

import shutil
import textwrap

import pytest
from test_gate_projects import assert_cannot_run, assert_failed, assert_no_worse, run_ticket, write

CALC = "module Calc\n  VALUE = 1\n  def self.add(a, b) = a + b\nend\n"
UPPER = "module Calc\n  VALUE = 1\n  def self.add(a, b) = a.is_a?(String) ? (a + b).upcase : a + b\nend\n"
SPEC = textwrap.dedent("""\
    require_relative '../calc'

    RSpec.describe 'Calc' do
      it('known bug') { expect(Calc::VALUE).to eq(2) }
      describe 'add' do
        it('two words') { expect(Calc.add('two ', 'words')).to eq('two words') }
        it('numbers') { expect(Calc.add(1, 2)).to eq(3) }
      end
    end
""")
# the project's own formatter, which middle's JSON report must not replace
FILES = {"calc.rb": CALC, "spec/calc_spec.rb": SPEC, ".rspec": "--format documentation\n"}
RSPEC = "rspec"

pytestmark = pytest.mark.skipif(shutil.which("rspec") is None,
                                reason="rspec is not installed (.ci/run installs Debian's ruby-rspec)")


def test_rspec_a_ticket_that_breaks_another_example_fails_naming_it(tmp_path):
    r = run_ticket(tmp_path, FILES, [RSPEC], write("calc.rb", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["spec/calc_spec.rb::Calc add two words"]
    assert r["final"]["already_failing"] == ["spec/calc_spec.rb::Calc known bug"]


@pytest.mark.parametrize("where", ["line", ".rspec"])
def test_rspec_fail_fast_still_sees_the_example_the_ticket_breaks(tmp_path, where):
    """`--fail-fast` stopped both runs at the base's known failure, so the example the ticket broke
    after it never ran and the ticket read as "no worse"; SPEC_OPTS' `--no-fail-fast` outranks it."""
    files = {**FILES, ".rspec": "--format documentation\n--fail-fast\n"} if where == ".rspec" else FILES
    r = run_ticket(tmp_path, files, [f"{RSPEC} --fail-fast" if where == "line" else RSPEC], write("calc.rb", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["spec/calc_spec.rb::Calc add two words"]


def test_rspec_a_ticket_that_leaves_the_known_failure_is_no_worse_naming_it(tmp_path):
    # an example added above the known one shifts its line: the identity does not move
    moved = SPEC.replace("  it('known bug')", "  it('one more') { expect(1).to eq(1) }\n  it('known bug')")
    r = run_ticket(tmp_path, FILES, [RSPEC], write("spec/calc_spec.rb", moved))
    assert_no_worse(r, "spec/calc_spec.rb::Calc known bug")
    assert r["final"]["tests_run"] == 4
    assert "known bug (FAILED - 1)" in r["final"]["tail"]  # .rspec's documentation formatter kept


def test_rspec_deleting_or_skipping_the_failing_example_is_a_failure(tmp_path):
    known = "  it('known bug') { expect(Calc::VALUE).to eq(2) }\n"
    r = run_ticket(tmp_path / "deleted", FILES, [RSPEC], write("spec/calc_spec.rb", SPEC.replace(known, "")))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["spec/calc_spec.rb::Calc known bug (removed)"]
    r = run_ticket(tmp_path / "skipped", FILES, [RSPEC],
                   write("spec/calc_spec.rb", SPEC.replace("it('known bug')", "xit('known bug')")))
    assert_failed(r)
    assert r["final"]["removed_tests"] == ["spec/calc_spec.rb::Calc known bug (skipped)"]


def test_rspec_a_spec_file_that_no_longer_loads_is_a_failure(tmp_path):
    r = run_ticket(tmp_path, FILES, [RSPEC], write("spec/other_spec.rb", "raise 'boom'\n"))
    assert_failed(r)
    assert "An error occurred while loading ./spec/other_spec.rb" in r["final"]["reason"]


def test_rake_spec_is_read_through_spec_opts_too(tmp_path):
    rakefile = "require 'rspec/core/rake_task'\nRSpec::Core::RakeTask.new(:spec)\n"
    r = run_ticket(tmp_path, {**FILES, "Rakefile": rakefile}, ["rake spec"], write("calc.rb", UPPER))
    assert_failed(r)
    assert r["final"]["new_failures"] == ["spec/calc_spec.rb::Calc add two words"]


@pytest.mark.parametrize("files, command, why", [
    ({**FILES, "spec/other_spec.rb": "raise 'boom'\n"}, RSPEC, "An error occurred while loading ./spec/other_spec.rb"),
    ({"calc.rb": CALC}, RSPEC, "names no tests"),
    (FILES, "rspec --no-such-option", "rspec: invalid option: --no-such-option"),
])
def test_rspec_that_cannot_really_run_is_an_error_before_any_turn(tmp_path, files, command, why):
    assert_cannot_run(run_ticket(tmp_path, files, [command], write("calc.rb", UPPER)), why)
