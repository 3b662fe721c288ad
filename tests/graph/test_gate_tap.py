"""The check gate on projects whose tests print TAP (the Test Anything Protocol): bats, `prove -v`
(Perl), a home-grown shell runner; tape's and node's TAP read from their own text. Each project's
base already fails one test; through the real graph, store, git worktrees and the real runners,
as tests/graph/test_gate_projects.py does for pytest. Before TAP was read, every one of these was
judged by its exit code alone: a harmless ticket failed ("the ticket must make it pass"), or,
with `baseline = "exit-code"`, a ticket breaking another test was "no worse". Also two checks
that ran no test at all and were taken for a suite: `make test` beside a `test/` folder, and npm's
placeholder test script.
"""

from __future__ import annotations

import shutil
import textwrap

import pytest
import test_gate_projects as gate

from orchestrator.checks.runners import tap

# -- a home-grown runner: a shell script printing TAP (nothing to install) ----------------------

RUN_SH = textwrap.dedent("""\
    #!/bin/sh
    # runs each tests/*.sh, one TAP line per test; the plan first
    set -u
    n=0; fail=0
    echo "1..$(ls tests/*.sh | wc -l)"
    for t in tests/*.sh; do
      n=$((n+1)); name=$(basename "$t" .sh)
      if sh "$t" >/dev/null 2>&1; then echo "ok $n - $name"; else echo "not ok $n - $name"; fail=1; fi
    done
    exit $fail
""")
SH_FILES = {
    "run-tests": RUN_SH,
    "VALUE": "1\n",
    "tests/known_bug.sh": 'test "$(cat VALUE)" = 2\n',  # already failing on the base
    "tests/greets.sh": "grep -q hello greet.txt\n",
    "tests/counts.sh": "test $((1 + 1)) = 2\n",
    "greet.txt": "hello\n",
}
SH = "sh run-tests"


def test_a_shell_runners_tap_harmless_ticket_is_no_worse_naming_the_base_failure(tmp_path):
    r = gate.run_ticket(tmp_path, SH_FILES, [SH], gate.write("NOTES.md", "Notes.\n"))
    gate.assert_no_worse(r, "known_bug")
    assert r["final"]["tests_run"] == 3


def test_a_shell_runners_tap_ticket_breaking_another_test_fails_naming_it(tmp_path):
    r = gate.run_ticket(tmp_path, SH_FILES, [SH], gate.write("greet.txt", "bye\n"))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["greets"] and r["final"]["already_failing"] == ["known_bug"]


def test_a_shell_runners_tap_ticket_deleting_the_failing_test_fails_naming_it(tmp_path):
    r = gate.run_ticket(tmp_path, SH_FILES, [SH], gate.delete("tests/known_bug.sh"))
    gate.assert_failed(r)
    assert r["final"]["removed_tests"] == ["known_bug (removed)"]


def test_a_shell_runners_tap_ticket_fixing_the_base_failure_passes(tmp_path):
    r = gate.run_ticket(tmp_path, SH_FILES, [SH], gate.write("VALUE", "2\n"))
    assert r["outcome"].status == "complete" and r["run"]["check_status"] == "passed"


def test_a_tap_run_that_dies_part_way_fails_even_beside_a_base_failure(tmp_path):
    """The plan announced 3 tests and the runner died after the first: the tests it never reached
    are named as not run, and the short stream is a failure of its own."""
    dying = RUN_SH.replace('n=$((n+1)); name=', '[ "$n" = 1 ] && test -f STOP && exit 2; n=$((n+1)); name=')
    r = gate.run_ticket(tmp_path, {**SH_FILES, "run-tests": dying}, [SH], gate.write("STOP", "\n"))
    gate.assert_failed(r)
    assert "(planned 3 tests, 1 reported)" in r["final"]["new_failures"]


def test_format_tap_reads_a_line_the_auto_reader_would_not_and_says_when_it_has_none(tmp_path):
    """`format = "tap"` on a command: read as TAP, whatever runs it; one printing no TAP line is
    a check that cannot run, said before any turn."""
    r = gate.run_ticket(tmp_path / "ok", SH_FILES, [{"run": SH, "format": "tap"}], gate.write("greet.txt", "bye\n"))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["greets"]
    r = gate.run_ticket(tmp_path / "none", SH_FILES, [{"run": "echo nothing; exit 1", "format": "tap"}],
                        gate.write("NOTES.md", "x\n"))
    gate.assert_cannot_run(r, "no TAP test line")


# -- bats (apt-get install bats) ---------------------------------------------------------------

BATS_FILES = {
    "VALUE": "1\n",
    "greet.txt": "hello\n",
    "test/basics.bats": textwrap.dedent("""\
        @test "the value is two" {
          [ "$(cat VALUE)" = 2 ]
        }

        @test "it greets" {
          grep -q hello greet.txt
        }

        @test "it counts" {
          [ $((1 + 1)) -eq 2 ]
        }
    """),
}
needs_bats = pytest.mark.skipif(shutil.which("bats") is None, reason="bats is not installed (apt-get install bats)")


@needs_bats
def test_bats_a_harmless_ticket_is_no_worse_and_one_breaking_another_test_fails(tmp_path):
    r = gate.run_ticket(tmp_path / "a", BATS_FILES, ["bats test"], gate.write("NOTES.md", "Notes.\n"))
    gate.assert_no_worse(r, "the value is two")
    assert r["final"]["tests_run"] == 3
    r = gate.run_ticket(tmp_path / "b", BATS_FILES, ["bats test"], gate.write("greet.txt", "bye\n"))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["it greets"] and r["final"]["already_failing"] == ["the value is two"]


@needs_bats
def test_bats_skipping_the_failing_test_fails_naming_it(tmp_path):
    skipped = BATS_FILES["test/basics.bats"].replace('[ "$(cat VALUE)" = 2 ]', 'skip "later"')
    r = gate.run_ticket(tmp_path, BATS_FILES, ["bats test"], gate.write("test/basics.bats", skipped))
    gate.assert_failed(r)
    assert r["final"]["removed_tests"] == ["the value is two (skipped)"]


@needs_bats
def test_bats_behind_make_is_read_too(tmp_path):
    files = {**BATS_FILES, "Makefile": ".PHONY: test\ntest:\n\tbats test\n"}
    r = gate.run_ticket(tmp_path, files, ["make test"], gate.write("greet.txt", "bye\n"))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["it greets"]


def test_make_test_beside_a_test_folder_without_phony_cannot_run(tmp_path):
    """`make test` with a `test/` folder and no `.PHONY: test`: make says "'test' is up to date" and
    runs nothing, exit 0. Before, that check passed on every ticket, whatever the ticket broke."""
    files = {**BATS_FILES, "Makefile": "test:\n\tbats test\n"}
    r = gate.run_ticket(tmp_path, files, ["make test"], gate.write("greet.txt", "bye\n"))
    gate.assert_cannot_run(r, "say `.PHONY: test` in the Makefile")


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npms_placeholder_test_script_cannot_run(tmp_path):
    """`npm init`'s test script echoes "Error: no test specified" and exits 1: before, the base
    "already failed" and every ticket had to make it pass; it is no suite, so it is the config's
    error, said before any turn."""
    script = 'echo \\"Error: no test specified\\" && exit 1'
    package = '{"name": "p", "version": "1.0.0", "scripts": {"test": "%s"}}\n' % script
    r = gate.run_ticket(tmp_path, {"package.json": package}, ["npm test"], gate.write("index.js", "\n"))
    gate.assert_cannot_run(r, "the placeholder `npm init` writes")


# -- Perl: prove -v (Test::More) ----------------------------------------------------------------

PERL_FILES = {
    "lib/Calc.pm": "package Calc;\nour $VALUE = 1;\nsub add { return $_[0] + $_[1] }\n1;\n",
    "t/calc.t": textwrap.dedent("""\
        use strict; use warnings; use lib 'lib'; use Calc;
        use Test::More tests => 3;
        is($Calc::VALUE, 2, 'the value is two');
        is(Calc::add(1, 2), 3, 'adds');
        is(Calc::add(2, 2), 4, 'adds again');
    """),
}
needs_prove = pytest.mark.skipif(shutil.which("prove") is None, reason="prove is not installed (apt-get install perl)")


@needs_prove
def test_prove_verbose_a_harmless_ticket_is_no_worse_and_a_broken_one_fails_naming_its_tests(tmp_path):
    r = gate.run_ticket(tmp_path / "a", PERL_FILES, ["prove -v t"], gate.write("README", "Notes.\n"))
    gate.assert_no_worse(r, "t/calc.t::the value is two")
    r = gate.run_ticket(tmp_path / "b", PERL_FILES, ["prove -v t"],
                        gate.write("lib/Calc.pm", PERL_FILES["lib/Calc.pm"].replace("+ $_[1]", "* $_[1]")))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["t/calc.t::adds"]  # 2 * 2 is still 4


# -- the reader on other runners' TAP, as they print it ---------------------------------------


def outcomes(text: str) -> dict[str, str]:
    return {ident: case.outcome for ident, case in tap.parse(text).cases.items()}


def test_node_tap_subtests_are_named_under_their_parent_and_yaml_blocks_are_skipped():
    text = textwrap.dedent("""\
        TAP version 13
        # Subtest: math
            # Subtest: adds
            ok 1 - adds
              ---
              duration_ms: 0.5
              ...
            # Subtest: subtracts
            not ok 2 - subtracts
              ---
              error: 'not ok 3 - a line of the error, not a test'
              ...
            1..2
        not ok 1 - math
          ---
          duration_ms: 2
          ...
        # Subtest: alone
        ok 2 - alone # SKIP not today
        1..2
    """)
    assert outcomes(text) == {"math > adds": "passed", "math > subtracts": "failed", "math": "failed",
                              "alone": "skipped"}


def test_tape_names_its_assertions_under_its_test_comments_and_numbers_same_named_ones():
    text = textwrap.dedent("""\
        TAP version 13
        # adds
        ok 1 should be equal
        ok 2 should be equal
        # subtracts
        not ok 3 should be equal
          ---
            operator: equal
          ...
        not ok 4 a known gap # TODO later

        1..4
        # tests 4
        # pass  2
        # fail  1
    """)
    assert outcomes(text) == {"adds > should be equal": "passed", "adds > should be equal (2)": "passed",
                              "subtracts > should be equal": "failed", "subtracts > a known gap": "skipped"}


def test_bail_out_and_several_streams():
    text = "1..2\nok 1 - a\nok 2 - b\n1..2\nok 1 - a\nBail out! the database is gone\n"
    assert outcomes(text) == {"a": "passed", "b": "passed", "a (2)": "passed",
                              "(bail out: the database is gone)": "failed"}
    # a plan at the end of one stream, then a stream with its plan first
    assert outcomes("ok 1 - x\n1..1\n1..1\nok 1 - y\n") == {"x": "passed", "y": "passed"}


def test_an_ordinary_log_is_not_read_as_tap():
    assert not tap.looks_like("ok then\nall good\n")
    assert not tap.looks_like("building 1..3\nok\n")  # no plan at a line's start
    assert not tap.looks_like("1..3\n  ok 1 - indented only\n")
    assert tap.looks_like("1..1\nok 1\n") and outcomes("1..1\nok 1\n") == {"test 1": "passed"}
