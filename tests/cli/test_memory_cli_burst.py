"""`middle memory search --explain` names the burst signal (backends/retrieval/burst.py) when
[memory.options] burst_weight is set: the real CLI, one process per command."""

from __future__ import annotations

from memory_cli_helpers import middle

from orchestrator.testing import make_repo

MATCH = "Ticket: Table view no longer reads the inspect data. Changed: app/views/table.py, app/loader.py"
MATE = "Ticket: Sortable columns computed on demand. Changed: app/loader.py, app/utils.py"


def test_search_explain_says_a_doc_came_by_its_burst(tmp_path):
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "hybrid"\n[memory.options]\nembedder = "hashing"\nburst_weight = 0.5\n')
    for doc in ("Ticket: Bump the widget pin. Changed: requirements.txt", MATCH,
                "Ticket: Sortable widgets get a border. Changed: app/widgets.css", MATE):
        middle(tmp_path, "add", doc)
    lines = middle(tmp_path, "search", "Stop reading inspect data in the table view", "-k", "2",
                   "--explain").stdout.splitlines()
    assert lines[0].endswith(MATCH) and lines[2].endswith(MATE)
    assert "burst: 2 doc(s) from a strong match that also names app/loader.py (lent 0.5" in lines[3]
