"""What teams ask of memory, as a user runs it (the CLI in this process, for speed: the
commands' code is the same): `<private>` spans cut from imported notes, transcripts and
commits, `--valid-until`, `search --as-of`, bulk delete and supersede with one question and one
undo, and every bad input one `error:` line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from test_memory_import import change

from orchestrator.cli.main import main
from orchestrator.memory.format import doc_id
from orchestrator.testing import make_repo


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "bm25"\n')
    return tmp_path


def middle(_root, *args: str, ok: bool = True, input: str | None = None) -> SimpleNamespace:
    """`middle memory ARGS`: no traceback, and exit 0 exactly when `ok`."""
    result = CliRunner().invoke(main, ["memory", *args], input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stderr
    assert (result.exit_code == 0) == ok, (result.stdout, result.stderr)
    return SimpleNamespace(stdout=result.stdout, stderr=result.stderr)


def listed(root) -> str:
    return middle(root, "list").stdout


def test_private_spans_are_cut_from_every_import(root):
    (root / "notes.md").write_text("# Ops\nThe staging key is <private>hunter2\n# Next\nstill "
                                   "secret hunter2</private> and public words.\n")
    (root / "s.jsonl").write_text(json.dumps(
        {"type": "user", "sessionId": "s", "message": {"role": "user", "content":
                                                       "Use <private>hunter2</private> to log in."}}) + "\n")
    change(root / "repo", "app.py", "Rotate keys", "The old one was <private>hunter2</private>.")
    middle(root, "import", "notes.md", "s.jsonl", "--no-progress")
    middle(root, "import", "git", "--no-progress")
    middle(root, "add", "Deploy <private>with hunter2</private> on Tuesdays.")
    text = listed(root)
    assert "hunter2" not in text and "secret" not in text
    # the heading inside the span went with it: its words joined the section before
    assert "notes.md > Ops\nThe staging key is and public words." in text.replace("          ", "")
    assert "Deploy on Tuesdays." in text and "User: Use to log in." in text


def test_valid_until_as_of_and_bulk_as_a_user_runs_them(root):
    middle(root, "add", "Rule: deploys go through the VPN.", "--valid-until", "2020-01-31")
    middle(root, "add", "Rule: deploys run nightly.")
    middle(root, "add", "Rule: exports stream CSV.")
    assert "(expired 2020-02-01T00:00:00)" in listed(root)
    found = middle(root, "search", "deploys rule").stdout
    assert "nightly" in found and "VPN" not in found
    vpn = doc_id("Rule: deploys go through the VPN.")[:8]
    assert "valid with no end (change 4)" in middle(root, "edit", vpn, "--valid-until", "never").stdout
    assert "VPN" in middle(root, "search", "deploys rule").stdout

    asked = middle(root, "delete", "--containing", "deploys", ok=False, input="n\n")
    assert "2 doc(s) match containing 'deploys':" in asked.stderr
    assert asked.stderr.strip().splitlines()[-1].endswith(
        "error: not confirmed: nothing was changed (add --yes to change them without the question)")
    done = middle(root, "delete", "--containing", "deploys", "--yes").stdout
    assert done.strip() == "deleted 2 docs (change 5; `middle memory undo 5` puts them all back)"
    assert "deploys" not in listed(root)
    then = middle(root, "search", "deploys rule", "--as-of", "2999-01-01")  # after the delete
    assert "0 doc(s)" not in then.stderr and "deploys" not in then.stdout
    before = middle(root, "search", "deploys rule", "--as-of", "2999-01-01T00:00", "--explain")
    assert "why: keywords rule" in before.stdout
    middle(root, "undo", "5")
    assert listed(root).count("deploys") == 2

    superseded = middle(root, "supersede", "--with", "Rule: everything ships through CI.",
                        "--source", "hand", "--containing", "Rule", "--yes").stdout
    assert superseded.startswith("superseded 3 docs by ")
    assert listed(root).count("(superseded by") == 3
    middle(root, "undo", "7")
    assert "superseded by" not in listed(root)


BAD = [
    (("delete",), "give a doc's id (`middle memory list` shows them), or filters"),
    (("delete", "abcd", "--source", "hand"), "give a doc's id or filters, not both"),
    (("delete", "--source", ""), "the filters are empty"),
    (("delete", "--source", "email"), "--source 'email' is none of ticket, commit"),
    (("delete", "--before", "2026-13-01", "--yes"), "--before '2026-13-01' is not a date"),
    (("supersede", "--with", "x", "--after", "soon"), "--after 'soon' is not a date"),
    (("delete", "--containing", "nothing like it", "--yes"), "no doc matches containing"),
    (("add", "x", "--valid-until", "tomorrow"), "--valid-until 'tomorrow' is not a date"),
    (("search", "x", "--as-of", "2026/01/01"), "--as-of '2026/01/01' is not a date"),
    (("add", "<private>only this</private>"), "the doc is all <private>...</private>"),
    (("add", "   "), "the doc is empty: give it some text"),
]


def test_bad_inputs_are_one_error_line_and_change_nothing(root):
    middle(root, "add", "Rule: a doc.")
    for args, words in BAD:
        error = middle(root, *args, ok=False).stderr.strip().splitlines()
        assert error[-1].startswith("error: ") and words in error[-1], (args, error)
        assert len([line for line in error if "error" in line]) == 1, (args, error)
    assert listed(root).strip() == f"{doc_id('Rule: a doc.')[:8]}  Rule: a doc."
    assert "change 2" not in middle(root, "history").stdout
