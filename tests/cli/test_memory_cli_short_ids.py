"""Every doc id the CLI prints is the one a person can paste back: two docs whose 8-character
ids meet (at 100,000 docs a few pairs do) are each shown by the 9 characters that tell them
apart in `search` (its lines, `--explain`'s why-lines, a superseded doc's note, `--as-of`),
`list`, `show` and `history`, and `show ID` of each printed id names the doc it was printed for."""

from __future__ import annotations

import re

import pytest
from test_memory_cli_team import middle

from orchestrator.memory.format import doc_id
from orchestrator.testing import make_repo

# Found by counting up: their SHA-256 ids both start 563c539b.
ONE = "Deploy note 16640: the staging cluster moved."
TWO = "Deploy note 67893: the staging cluster moved."
IDS = re.compile(r"\b[0-9a-f]{8,64}\b")


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


def shown_doc(root, ident: str) -> str:
    """The whole id of the doc `middle memory show IDENT` names."""
    head = middle(root, "show", ident).stdout.splitlines()[0]
    return head.split("(")[1].split(")")[0]


def test_each_id_the_cli_prints_names_its_own_doc(root):
    assert doc_id(ONE)[:8] == doc_id(TWO)[:8] and doc_id(ONE)[8] != doc_id(TWO)[8]
    one, two = doc_id(ONE)[:9], doc_id(TWO)[:9]
    middle(root, "add", ONE)
    middle(root, "supersede", one, "--with", TWO)  # TWO replaces ONE: each names the other
    found = middle(root, "search", "staging cluster moved", "--explain").stdout
    assert f"[{one}] {ONE}" in found and f"[{two}] {TWO}" in found
    assert f"(superseded by {two}: kept as history)" in found
    assert f"supersedes {one}" in found and f"superseded by {two}" in found  # the why-lines
    then = middle(root, "search", "staging cluster moved", "--as-of", "2999-01-01").stdout
    assert f"[{two}] {TWO}" in then
    printed = {i for text in (found, then) for i in IDS.findall(text)}
    printed |= set(IDS.findall(middle(root, "list").stdout))
    shown = middle(root, "show", two).stdout
    assert f"written to supersede {one}" in shown
    printed |= set(IDS.findall(shown)) | set(IDS.findall(middle(root, "history").stdout))
    printed = {i for i in printed if i[:8] == one[:8] and len(i) < 64}
    assert printed == {one, two}  # never the 8 the two share
    for ident in printed:
        assert shown_doc(root, ident) == doc_id(ONE if ident == one else TWO)
