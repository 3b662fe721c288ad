"""`middle memory search --explain` names the issue signal (backends/retrieval/issues.py) when
[memory.options] issue_hop is set: the real CLI, one process per command."""

from __future__ import annotations

from memory_cli_helpers import middle

from orchestrator.testing import make_repo

MATCH = "Ticket: Table view no longer reads the inspect data. Changed: app/views/table.py. Issues: #418."
MATE = "Ticket: Sortable columns computed on demand. Changed: app/sort.py. Issues: #418."


def test_search_explain_says_a_doc_came_through_an_issue(tmp_path):
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "hybrid"\n[memory.options]\nembedder = "hashing"\nissue_hop = true\nthread_docs = false\n')
    for doc in (MATE, "Ticket: Bump the widget pin. Changed: requirements.txt", MATCH,
                "Ticket: Sortable widgets get a border. Changed: app/widgets.css. Issues: #4180."):
        middle(tmp_path, "add", doc)
    lines = middle(tmp_path, "search", "Stop reading inspect data in the table view", "-k", "2",
                   "--explain").stdout.splitlines()
    # MATE shares no query word; it names #418, as MATCH, the best match, does. In both lists
    # (fused and hop), it ranks first by reciprocal rank.
    docs = [line.split("] ", 1)[-1] for line in lines[0::2]]  # "  score  [id] doc"
    assert docs == [MATE, MATCH], lines
    assert 'issue: names #418, as does the match ranked 1 ("Ticket: Table view' in lines[1]
    assert "issue:" not in lines[3]


def test_a_wrong_issue_hop_value_is_one_error_line(tmp_path):
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "hybrid"\n[memory.options]\nembedder = "hashing"\nissue_hop = "often"\n')
    failed = middle(tmp_path, "search", "anything", ok=False)
    lines = [ln for ln in failed.stderr.splitlines() if ln.strip()]
    assert failed.returncode != 0 and len(lines) == 1
    assert lines[0].startswith("error: ") and "issue_hop" in lines[0]
