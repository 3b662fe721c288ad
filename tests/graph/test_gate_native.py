"""The check gate on Rust and Go projects, read test by test with no configuration: `cargo test`
(libtest's own lines, `--no-fail-fast` added) and `go test` (its `-v` lines, `GOFLAGS=-v`).
Each project's base already fails one test; through the real graph, store, git worktrees and
the real runners (offline: projects with no dependencies), as tests/graph/test_gate_projects.py
does for pytest and the others. Skipped only where the runner is not installed (.ci/run installs
both).
"""

from __future__ import annotations

import shutil
import textwrap

import pytest
import test_gate_projects as gate

# -- a Rust crate: unit tests, an integration test and a doc-test -------------------------------

LIB_RS = textwrap.dedent("""\
    pub const VALUE: i32 = 1;

    /// Adds two numbers.
    ///
    /// ```
    /// assert_eq!(calc::add(1, 2), 3);
    /// ```
    pub fn add(a: i32, b: i32) -> i32 {
        a + b
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn known_bug() {
            assert_eq!(super::VALUE, 2);
        }

        #[test]
        fn adds() {
            assert_eq!(super::add(1, 2), 3);
        }
    }
""")
CARGO_FILES = {
    "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "src/lib.rs": LIB_RS,
    "tests/api.rs": "#[test]\nfn adds_numbers() {\n    assert_eq!(calc::add(2, 2), 4);\n}\n",
}
KNOWN_RS = "src/lib.rs (calc)::tests::known_bug"
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (apt-get install cargo)")


@pytest.fixture
def cargo_env(tmp_path, monkeypatch):
    """Offline, and one target folder for the base's and the ticket's builds (outside the worktree)."""
    monkeypatch.setenv("CARGO_NET_OFFLINE", "true")
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    monkeypatch.delenv("RUSTFLAGS", raising=False)


@needs_cargo
def test_cargo_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path, cargo_env):
    r = gate.run_ticket(tmp_path, CARGO_FILES, ["cargo test"],
                        gate.write("src/lib.rs", LIB_RS.replace("a + b", "a * b")))
    gate.assert_failed(r)
    # 2 * 2 == 2 + 2: the integration test still passes; the unit test and the doc-test do not
    assert r["final"]["new_failures"] == ["doc-tests (calc)::src/lib.rs - add", "src/lib.rs (calc)::tests::adds"]
    assert r["final"]["already_failing"] == [KNOWN_RS]


@needs_cargo
def test_cargo_a_ticket_that_leaves_the_known_failure_is_no_worse_every_binary_ran(tmp_path, cargo_env):
    # A line above the doc-test's example moves it: the same doc-test all the same (no line number)
    moved = "//! The calc crate.\n\n" + LIB_RS
    r = gate.run_ticket(tmp_path, CARGO_FILES, ["cargo test"],
                        lambda cwd: (gate.write("NOTES.md", "Notes.\n")(cwd), gate.write("src/lib.rs", moved)(cwd)))
    gate.assert_no_worse(r, KNOWN_RS)
    # the unit tests failing did not stop cargo: the integration test and the doc-test ran too
    assert r["final"]["tests_run"] == 4 and r["final"]["removed_tests"] == []


@needs_cargo
def test_cargo_deleting_the_failing_test_is_a_failure(tmp_path, cargo_env):
    without = LIB_RS.replace("    #[test]\n    fn known_bug() {\n        assert_eq!(super::VALUE, 2);\n    }\n\n", "")
    r = gate.run_ticket(tmp_path, CARGO_FILES, ["cargo test"], gate.write("src/lib.rs", without))
    gate.assert_failed(r)
    assert r["final"]["removed_tests"] == [f"{KNOWN_RS} (removed)"]


@needs_cargo
def test_cargo_ignoring_the_failing_test_is_a_failure(tmp_path, cargo_env):
    ignored = LIB_RS.replace("    #[test]\n    fn known_bug()", "    #[test]\n    #[ignore]\n    fn known_bug()")
    r = gate.run_ticket(tmp_path, CARGO_FILES, ["cargo test"], gate.write("src/lib.rs", ignored))
    gate.assert_failed(r)
    assert r["final"]["removed_tests"] == [f"{KNOWN_RS} (skipped)"]


@needs_cargo
def test_cargo_a_ticket_that_breaks_the_build_fails_and_a_usage_error_cannot_run(tmp_path, cargo_env):
    r = gate.run_ticket(tmp_path / "build", CARGO_FILES, ["cargo test"],
                        gate.write("src/lib.rs", LIB_RS.replace("a + b", 'a + "b"')))
    gate.assert_failed(r)
    assert "could not run: cargo test ran no test: error: could not compile `calc`" in r["final"]["reason"]
    r = gate.run_ticket(tmp_path / "usage", CARGO_FILES, ["cargo test --no-such-option"],
                        gate.write("NOTES.md", "Notes.\n"))
    gate.assert_cannot_run(r, "cargo test ran no test: error: ")
    assert "--no-such-option" in str(r["outcome"])  # cargo's own words vary with its version


# -- scopeguard's crate docs: several doc examples on the crate itself, all named `src/lib.rs -
# (line N)`; doc-tests print as they finish, in parallel, so their order changes from run to run --

def crate_docs(slow: str) -> str:
    """Two crate-level examples, the second already failing on the base; `slow` finishes last."""
    def example(name: str, body: str) -> str:
        wait = "std::thread::sleep(std::time::Duration::from_secs(2));\n//! " if name == slow else ""
        return f"//! ```\n//! {wait}{body}\n//! ```\n"
    return (example("first", "assert_eq!(calc::VALUE, 1);") + "//!\n"
            + example("second", "assert_eq!(calc::VALUE, 2);") + "\n" + LIB_RS)


@needs_cargo
def test_cargo_crate_doc_examples_are_named_by_their_order_in_the_file_not_in_the_output(tmp_path, cargo_env):
    # the base's failing example prints last; the ticket's edit makes the other one print last
    files = {**CARGO_FILES, "src/lib.rs": crate_docs(slow="second")}
    r = gate.run_ticket(tmp_path, files, ["cargo test"], gate.write("src/lib.rs", crate_docs(slow="first")))
    gate.assert_no_worse(r, "doc-tests (calc)::src/lib.rs - (2)")
    assert r["final"]["already_failing"] == ["doc-tests (calc)::src/lib.rs - (2)", KNOWN_RS]


# -- a Go module: two packages, subtests --------------------------------------------------------

CALC_TEST_GO = textwrap.dedent("""\
    package calc

    import "testing"

    func TestKnownBug(t *testing.T) {
    \tif Value != 2 {
    \t\tt.Fatal("Value is not 2")
    \t}
    }

    func TestAdd(t *testing.T) {
    \tfor _, c := range []struct{ name string; a, b, want int }{{"two words", 1, 2, 3}, {"zero", 0, 0, 0}} {
    \t\tt.Run(c.name, func(t *testing.T) {
    \t\t\tif Add(c.a, c.b) != c.want {
    \t\t\t\tt.Fatalf("Add(%d, %d) != %d", c.a, c.b, c.want)
    \t\t\t}
    \t\t})
    \t}
    }
""")
CALC_GO = "package calc\n\nconst Value = 1\n\nfunc Add(a, b int) int { return a + b }\n"
GO_FILES = {
    "go.mod": "module example.com/m\n\ngo 1.19\n",
    "calc.go": CALC_GO,
    "calc_test.go": CALC_TEST_GO,
    "words/words.go": "package words\n\nfunc Two() string { return \"two\" }\n",
    "words/words_test.go": 'package words\n\nimport "testing"\n\nfunc TestTwo(t *testing.T) {\n'
                           '\tif Two() != "two" {\n\t\tt.Fatal("not two")\n\t}\n}\n',
}
KNOWN_GO = "example.com/m::TestKnownBug"
needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (apt-get install golang-go)")


@pytest.fixture
def go_env(monkeypatch):
    """Offline: no module proxy, nothing to download (the module has no dependencies)."""
    monkeypatch.setenv("GOPROXY", "off")
    monkeypatch.setenv("GOFLAGS", "-mod=mod")
    monkeypatch.setenv("GOTOOLCHAIN", "local")


@needs_go
def test_go_a_ticket_that_breaks_another_test_fails_naming_it(tmp_path, go_env):
    r = gate.run_ticket(tmp_path, GO_FILES, ["go test ./..."], gate.write("calc.go", CALC_GO.replace("a + b", "a * b")))
    gate.assert_failed(r)
    assert r["final"]["new_failures"] == ["example.com/m::TestAdd", "example.com/m::TestAdd/two_words"]
    assert r["final"]["already_failing"] == [KNOWN_GO]
    # what the middle agent and the log read is go's own text
    assert "--- FAIL: TestAdd/two_words" in r["final"]["tail"] and '"Action"' not in r["final"]["tail"]


@needs_go
def test_go_a_line_listing_its_packages_with_go_list_is_read_and_one_asking_for_json_too(tmp_path, go_env):
    """`go list` in the line still prints package names (GOFLAGS gains -v, not -json); a line's own
    `-json` is read from its events."""
    for i, line in enumerate(["go test $(go list ./...)", "go test -json ./..."]):
        r = gate.run_ticket(tmp_path / str(i), GO_FILES, [line],
                            gate.write("calc.go", CALC_GO.replace("a + b", "a * b")))
        gate.assert_failed(r)
        assert r["final"]["new_failures"] == ["example.com/m::TestAdd", "example.com/m::TestAdd/two_words"]
        assert r["final"]["already_failing"] == [KNOWN_GO] and '"Action"' not in r["final"]["tail"]


@needs_go
def test_go_a_ticket_that_leaves_the_known_failure_is_no_worse(tmp_path, go_env):
    r = gate.run_ticket(tmp_path, GO_FILES, ["go test ./..."], gate.write("NOTES.md", "Notes.\n"))
    gate.assert_no_worse(r, KNOWN_GO)
    assert r["final"]["tests_run"] == 5  # TestKnownBug, TestAdd and its two subtests, words' TestTwo


@needs_go
def test_go_deleting_the_failing_test_is_a_failure(tmp_path, go_env):
    without = CALC_TEST_GO.replace('func TestKnownBug(t *testing.T) {\n\tif Value != 2 {\n\t\tt.Fatal("Value is not 2")'
                                   '\n\t}\n}\n\n', "")
    r = gate.run_ticket(tmp_path, GO_FILES, ["go test ./..."], gate.write("calc_test.go", without))
    gate.assert_failed(r)
    assert r["final"]["removed_tests"] == [f"{KNOWN_GO} (removed)"]


@needs_go
def test_go_a_package_that_stops_building_fails_and_a_usage_error_or_no_test_cannot_run(tmp_path, go_env):
    r = gate.run_ticket(tmp_path / "build", GO_FILES, ["go test ./..."],
                        gate.write("words/words.go", 'package words\n\nfunc Two() int { return "two" }\n'))
    gate.assert_failed(r)
    assert "example.com/m/words::(build failed)" in r["final"]["new_failures"]
    assert "example.com/m/words::TestTwo (removed)" in r["final"]["removed_tests"]
    r = gate.run_ticket(tmp_path / "usage", GO_FILES, ["go test -no-such-flag ./..."], gate.write("NOTES.md", "N\n"))
    gate.assert_cannot_run(r, "go test ran no test: flag provided but not defined: -no-such-flag")
    r = gate.run_ticket(tmp_path / "none", GO_FILES, ["go test -run NoSuchTest ./..."], gate.write("NOTES.md", "N\n"))
    gate.assert_cannot_run(r, "go test ran no test")  # it exits 0: a filter that matches nothing is no baseline
