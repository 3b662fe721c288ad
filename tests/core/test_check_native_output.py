"""cargo test and go test read from their own output (orchestrator/checks/runners/cargo.py,
go.py): which lines are theirs, how a test is named, what the line and environment become.
The real runners through the real graph: tests/graph/test_gate_native.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.checks.instrument import prepare, runner_of
from orchestrator.checks.runners import cargo, go
from orchestrator.config.settings import CheckCommand


@pytest.mark.parametrize("line, runner", [
    ("cargo test", "cargo"), ("cd core && cargo test --all -- --nocapture", "cargo"),
    ("cargo +nightly test", "cargo"), ("cargo nextest run", ""), ("cargo test-all", ""),
    ("cargo test -q", ""), ("cargo test -- --quiet", ""), ("cargo test --all && echo -q", "cargo"),
    ("go test ./...", "go"), ("make && go test -race ./pkg/...", "go"),
    ("pytest -q && cargo test", "pytest"), ("go vet ./...", ""), ("gotestsum -- ./...", ""), ("echo go testing", ""),
])
def test_which_lines_run_cargo_or_go_test_directly(line, runner):
    assert runner_of(line) == runner


def test_cargo_gets_no_fail_fast_before_its_own_arguments_and_go_gets_v_in_goflags(tmp_path: Path):
    cargo = prepare(CheckCommand(run="cargo test --all -- --nocapture"), tmp_path, {})
    assert cargo.line == "cargo test --no-fail-fast --all -- --nocapture" and cargo.runner == "cargo"
    assert prepare(CheckCommand(run="cargo test --no-fail-fast"), tmp_path, {}).line == "cargo test --no-fail-fast"
    go = prepare(CheckCommand(run="go test ./..."), tmp_path, {"GOFLAGS": "-mod=mod"})
    assert go.line == "go test ./..." and go.env == {"GOFLAGS": "-mod=mod -v"}
    # a command that says how it is read is read that way, its line and environment as written
    for spec in (CheckCommand(run="go test ./...", format="exit-code"),
                 CheckCommand(run="go test ./... 2>&1 | go-junit-report > r.xml", junit="r.xml")):
        p = prepare(spec, tmp_path, {})
        assert p.runner == "" and p.env == {} and p.line == spec.run


def test_cargo_names_a_test_by_its_binary_without_the_build_hash_and_doc_tests_without_lines():
    out = "\n".join([
        "     Running unittests src/main.rs (target/debug/deps/app-0123456789abcdef)",
        "test cli::parses ... ok", "test cli::slow ... ignored, needs a network",
        "\x1b[1m\x1b[92m     Running\x1b[0m target/debug/deps/api-fedcba9876543210",  # an older cargo: no source
        "test adds ... FAILED",
        "Running what a test printed, not a binary",
        "test prints ... hello from prints",  # --nocapture --test-threads=1: its outcome comes later
        "more of what it printed", "ok",
        "     Running unittests (target/debug/deps/cli-0123456789abcdef)",  # cargo 1.53 to 1.57
        "test parses ... ok",
        "   Doc-tests app",
        "test src/lib.rs - add (line 5) ... ok", "test src/lib.rs - add (line 12) ... FAILED",
        "---- cli::parses stdout ----", "test result: FAILED. 1 passed; 1 failed",
    ])
    report = cargo.parse(out)
    assert {i: c.outcome for i, c in report.cases.items()} == {
        "src/main.rs (app)::cli::parses": "passed", "src/main.rs (app)::cli::slow": "skipped",
        "api::adds": "failed", "api::prints": "passed", "cli::parses": "passed",
        "doc-tests (app)::src/lib.rs - add": "passed", "doc-tests (app)::src/lib.rs - add (2)": "failed"}
    assert cargo.cannot_run(out) is None
    assert cargo.cannot_run("error[E0308]: mismatched types\nerror: could not compile `app`\n") == \
        "cargo test ran no test: error: could not compile `app`"


GO_V = """\
=== RUN   TestA
    a_test.go:7: Value is not 2
--- FAIL: TestA (0.00s)
=== RUN   TestA/sub_case
    --- PASS: TestA/sub_case (0.00s)
printed without a newline--- SKIP: TestS (0.00s)
FAIL
exit status 1
FAIL\tex/m\t0.006s
=== RUN   TestB
--- PASS: TestB (0.00s)
PASS
ok  \tex/m/b\t(cached)
ok   ex/m/not-a-summary (a test's own print: no tab)
?   \tex/m/nothing\t[no test files]
panic: in init
FAIL\tex/m/c\t0.001s
# ex/m/d
./d.go:3:1: syntax error
FAIL\tex/m/d [build failed]
"""


def test_go_names_package_and_test_and_a_package_failing_without_a_test_is_one_failure():
    report = go.parse(GO_V)
    assert {i: c.outcome for i, c in report.cases.items()} == {
        "ex/m::TestA": "failed", "ex/m::TestA/sub_case": "passed", "ex/m::TestS": "skipped",
        "ex/m/b::TestB": "passed", "ex/m/c::(package failed)": "failed", "ex/m/d::(build failed)": "failed"}
    assert go.readable(GO_V) == GO_V  # -v output is shown as it is
    assert go.cannot_run(GO_V) is None
    assert go.cannot_run("# ex/m\n./a.go:1:1: bad\nFAIL\tex/m [build failed]\n") == \
        "go test ran no test: FAIL\tex/m [build failed]"


def test_a_line_that_asks_go_for_json_itself_is_read_from_its_events_and_shown_as_their_text():
    def event(action: str, pkg: str, test: str | None = None, output: str | None = None, **more: str) -> str:
        data = {"Action": action, "Package": pkg, "Test": test, "Output": output, **more}
        return json.dumps({k: v for k, v in data.items() if v is not None})

    out = "\n".join([
        event("run", "ex/m", "TestA"), event("output", "ex/m", "TestA", "--- FAIL: TestA (0.00s)\n"),
        event("fail", "ex/m", "TestA"), event("output", "ex/m", None, "FAIL\tex/m\t0.01s\n"), event("fail", "ex/m"),
        # go 1.24 and later: a build's failure as events
        json.dumps({"ImportPath": "ex/m/e [ex/m/e.test]", "Action": "build-output", "Output": "./e.go:1:1: bad\n"}),
        event("output", "ex/m/e", None, "FAIL\tex/m/e [build failed]\n"),
        event("fail", "ex/m/e", FailedBuild="ex/m/e [ex/m/e.test]"), "not json {",
    ])
    assert {i: c.outcome for i, c in go.parse(out).cases.items()} == {
        "ex/m::TestA": "failed", "ex/m/e::(build failed)": "failed"}
    assert go.readable(out) == ("--- FAIL: TestA (0.00s)\nFAIL\tex/m\t0.01s\n./e.go:1:1: bad\n"
                                     "FAIL\tex/m/e [build failed]\nnot json {\n")


def test_go_json_events_of_packages_run_at_once_are_read_package_by_package():
    """`go test -json ./...` runs packages at once: B's summary can come between A's `--- FAIL`
    and A's own summary. Read as one text, A's failure was given to B (the flaky gate test)."""
    def event(action: str, pkg: str, output: str) -> str:
        return json.dumps({"Action": action, "Package": pkg, "Output": output})

    out = "\n".join([
        event("output", "ex/m", "=== RUN   TestKnownBug\n"),
        event("output", "ex/m", "--- FAIL: TestKnownBug (0.00s)\n"),
        event("output", "ex/m/words", "--- PASS: TestTwo (0.00s)\n"),
        event("output", "ex/m/words", "ok  \tex/m/words\t0.01s\n"),
        event("output", "ex/m", "--- PASS: TestAdd (0.00s)\n"),
        event("output", "ex/m", "FAIL\tex/m\t0.01s\n"),
    ])
    assert {i: c.outcome for i, c in go.parse(out).cases.items()} == {
        "ex/m::TestKnownBug": "failed", "ex/m::TestAdd": "passed", "ex/m/words::TestTwo": "passed"}


# -- behind a wrapper (`make test` running `cargo test`) -----------------------------------------
# cargo 1.9x's own words, fail-fast and --no-fail-fast: both say "to rerun pass" for a failing
# binary; only --no-fail-fast goes on to the next one and closes with "N target(s) failed"
CARGO_HEAD = ("     Running unittests src/lib.rs (target/debug/deps/calc-c6626fb655a8d231)\n\nrunning 2 tests\n"
              "test tests::adds ... ok\ntest tests::known_bug ... FAILED\n\nfailures:\n    tests::known_bug\n\n"
              "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.12s\n\n"
              "error: test failed, to rerun pass `--lib`\n")
CARGO_FAIL_FAST = CARGO_HEAD + "make: *** [Makefile:3: test] Error 101\n"
CARGO_ALL = (CARGO_HEAD + "     Running tests/api.rs (target/debug/deps/api-0123456789abcdef)\n\nrunning 1 test\n"
             "test api_adds ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
             "finished in 0.00s\n\nerror: 1 target failed:\n    `--lib`\nmake: *** [Makefile:3: test] Error 101\n")


def test_a_wrappers_output_shows_cargos_tests_and_whether_cargo_stopped_at_its_first_failing_binary():
    assert not cargo.stopped(CARGO_ALL) and cargo.stopped(CARGO_FAIL_FAST) and cargo.stopped(CARGO_HEAD)
    found = cargo.in_output(CARGO_ALL)
    assert found is not None and found.failing == ["src/lib.rs (calc)::tests::known_bug"]
    assert found.ran == ["src/lib.rs (calc)::tests::adds", "src/lib.rs (calc)::tests::known_bug",
                         "tests/api.rs (api)::api_adds"]
    # another runner's `test x ... ok` (a unittest named "test", a shell script) is not cargo's
    assert cargo.in_output("test adds ... ok\ntest result: ok. 1 passed; 0 failed;\n") is None


def test_middles_cargo_first_on_path_adds_no_fail_fast_to_cargo_test_alone(tmp_path: Path):
    import subprocess

    # a cargo that prints what it was given, first on PATH (the real one's runs: the gate table's row)
    real = tmp_path / "real"
    real.mkdir()
    (real / "cargo").write_text('#!/bin/sh\necho "$@"\n')
    (real / "cargo").chmod(0o755)
    env = cargo.shim(tmp_path, {"PATH": f"{real}:/usr/bin:/bin"})
    assert env["PATH"].endswith(f":{real}:/usr/bin:/bin")

    def run(line: str) -> str:
        done = subprocess.run(["/bin/sh", "-c", line], env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    assert run("cargo test --all -- --nocapture") == "test --no-fail-fast --all -- --nocapture"
    assert run("cargo +nightly test") == "+nightly test --no-fail-fast"
    assert run("cargo test --no-fail-fast") == "test --no-fail-fast"  # cargo refuses it twice
    assert run("cargo build --release") == "build --release"
    assert run("cargo test -- --no-fail-fast") == "test --no-fail-fast -- --no-fail-fast"  # libtest's, not cargo's
    assert cargo.shim(tmp_path, {"PATH": str(tmp_path / "none")}) == {}  # no cargo: PATH as it is


def test_a_go_package_that_passed_listing_no_test_ran_without_v():
    verbose = "=== RUN   TestAdds\n--- PASS: TestAdds (0.00s)\nPASS\nok  \texample.com/calc\t(cached)\n"
    quiet = "ok  \texample.com/calc\t0.002s\nok  \texample.com/none\t0.001s [no tests to run]\n" \
            "?   \texample.com/cmd\t[no test files]\n"
    assert go.quiet_packages(verbose) == [] and go.quiet_packages(quiet) == ["example.com/calc"]


def test_the_packages_go_vet_lists_under_goflags_v_are_one_line_of_the_output_shown():
    listed = "".join(f"{p}\n" for p in ("internal/goarch", "internal/abi", "fmt", "sync", "testing", "example.com/m"))
    text = "go vet ./...\n" + listed + "PASS\nok  \texample.com/m\t0.01s\nok\nfine\n"
    shown = go.without_package_lists(text)
    assert shown == ("go vet ./...\n[go: 6 packages listed (internal/goarch ... example.com/m), GOFLAGS=-v]\n"
                     "PASS\nok  \texample.com/m\t0.01s\nok\nfine\n")
