"""`middle memory search --explain` names the thread words signal (backends/retrieval/expansion.py)
when [memory.options] thread_expansion is set: the real CLI, one process per command."""

from __future__ import annotations

from memory_cli_helpers import middle

from orchestrator.testing import make_repo

TAUGHT = [
    "Ticket: Row count times out on big tables. Changed: app/count.py. Issues: #10.",
    "Ticket: Foreign key inspect is slow. Changed: app/inspect.py. Issues: #10.",
    "Ticket: Show a timeout notice for the count. Changed: app/notice.py. Issues: #20.",
    "Ticket: Cache the inspect data of foreign tables. Changed: app/cache.py. Issues: #20.",
]
TARGET = "Ticket: Expand foreign references without inspect. Changed: app/expand.py."


def _config(tmp_path, value: str) -> None:
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "hybrid"\n[memory.options]\nembedder = "hashing"\n'
        f"thread_expansion = {value}\nthread_docs = false\n")


def test_search_explain_says_a_doc_came_by_the_words_threads_teach(tmp_path):
    _config(tmp_path, "true")
    for doc in TAUGHT + [f"Ticket: Chore {i}: bump the widget{i} pin. Changed: r{i}.txt" for i in range(8)] + [TARGET]:
        middle(tmp_path, "add", doc)
    lines = middle(tmp_path, "search", "Show many rows when the count times out", "-k", "8",
                   "--explain").stdout.splitlines()
    at = [n for n, line in enumerate(lines) if line.endswith(TARGET)]
    assert at, lines  # it shares no word with the query
    assert 'thread words: matches "foreign", "inspect"' in lines[at[0] + 1]


def test_a_wrong_thread_expansion_value_is_one_error_line(tmp_path):
    _config(tmp_path, '"often"')
    failed = middle(tmp_path, "search", "anything", ok=False)
    lines = [ln for ln in failed.stderr.splitlines() if ln.strip()]
    assert failed.returncode != 0 and len(lines) == 1
    assert lines[0].startswith("error: ") and "thread_expansion" in lines[0]
