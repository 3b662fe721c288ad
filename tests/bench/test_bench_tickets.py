"""`middle bench tickets`: ticket histories from a file or a real git repository, the replay, its
metrics (recall, hit, MRR, the relevant share of the "Memories invoked" block) and the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.bench import ticket_data
from orchestrator.bench.replay import WINDOW, Owners, block_precision, long_range, relevant_earlier, run_tickets, select
from orchestrator.cli.main import main
from orchestrator.errors import ConfigError
from orchestrator.memory.facade import format_memories
from orchestrator.memory.format import block_layout, format_block

KEYS = {"backend", "query", "recall@5", "recall@10", "hit@5", "mrr@10", "retrieve_p95_ms",
        "index_p95_ms"}


def git(repo: Path, *args: str, date: str = "2024-01-01T10:00:00+00:00") -> None:
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@example.com", "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_DATE": date, "PATH": "/usr/bin:/bin:/usr/local/bin"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def commit(repo: Path, path: str, message: str, hour: int) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{message}\n{hour}\n")
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message, date=f"2024-01-01T{hour:02d}:00:00+00:00")


@pytest.fixture
def repo(tmp_path) -> Path:
    """Six commits on three issues, one merge commit (not a ticket), refs in several forms."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "app/login.py", "Add login form, refs #1", 1)
    commit(repo, "app/export.py", "CSV export of tables\n\nFirst cut. Closes #2", 2)
    commit(repo, "app/login.py", "Login form validates email (#1)", 3)
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "docs/export.md", "Document the CSV export\n\nSee https://github.com/o/r/issues/2", 4)
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "side", "-m", "Merge branch side (#9)")
    commit(repo, "app/search.py", "Search box on every page", 6)
    commit(repo, "app/login.py", "Fix login redirect\n\nFixes #1 and other/repo#1",  7)
    return repo


def test_another_repositorys_issue_url_is_no_ref(repo):
    """As in the shared export: `Refs https://github.com/o/plugin/issues/1` names the plugin's
    issue 1, not this repository's (counted, such URLs had paired unrelated plugin-directory
    commits). The repository's own is its origin's, else the one its history links most."""
    commit(repo, "docs/plugins.md", "Add a plugin\n\nRefs https://github.com/o/plugin/issues/1", 8)
    commit(repo, "app/login.py", "Login: remember me\n\nhttps://github.com/O/R/issues/1", 9)
    history = ticket_data.load_git_repo(repo)
    assert [t.refs for t in history.tickets[-2:]] == [[], [1]]  # o/r: named twice, o/plugin once
    assert history.tickets[-2].description == "Refs"  # taken out of the text all the same
    git(repo, "remote", "add", "origin", "git@github.com:o/plugin.git")
    assert [t.refs for t in ticket_data.load_git_repo(repo).tickets[-2:]] == [[1], []]
    assert ticket_data.own_repository("", "https://github.com/Pallets/click.git") == "Pallets/click"
    assert ticket_data.own_repository("no links", "/srv/mirror") is None


def test_git_history_becomes_tickets_with_refs_removed_from_the_text(repo):
    history = ticket_data.load_git_repo(repo)
    assert history.name == "repo"
    assert [t.title for t in history.tickets] == [
        "Add login form", "CSV export of tables", "Login form validates email",
        "Document the CSV export", "Search box on every page", "Fix login redirect"]
    assert [t.refs for t in history.tickets] == [[1], [2], [1], [2], [], [1]]
    assert history.tickets[1].description == "First cut."
    assert history.tickets[5].description == "and"  # "other/repo#1" is another repo's issue
    assert history.tickets[3].paths == ["docs/export.md"]
    assert history.tickets[0].completion_doc() == "Ticket: Add login form. . Changed: app/login.py"
    assert history.tickets[0].turn_query() == "Add login form\nChanged app/login.py"
    assert history.tickets[0].timestamp < history.tickets[5].timestamp
    # Relevant: earlier tickets sharing an issue.
    assert relevant_earlier(history.tickets) == [set(), set(), {0}, {1}, set(), {0, 2}]


def test_a_release_commit_relates_to_nothing_as_in_the_shared_export(repo):
    """A release commit lists every issue of its release: counted, most long-range pairs of a
    repository's history were release notes (shared/data/tickets' export drops them too)."""
    commit(repo, "CHANGES.md", "Release 1.2\n\n- Login form (#1)\n- CSV export (#2)", 8)
    commit(repo, "CHANGES.md", "Release notes for 1.3, refs #2", 9)
    commit(repo, "app/export.py", "Export: release the file handle early, refs #2", 10)
    history = ticket_data.load_git_repo(repo)
    assert [t.refs for t in history.tickets[-3:]] == [[], [], [2]]
    assert history.tickets[-3].description == "Login form - CSV export"  # still taken out


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "not a git repository"),
    (lambda p: p / "missing", "no such directory"),
])
def test_a_path_that_is_not_a_repository_is_a_clear_error(tmp_path, make, message):
    with pytest.raises(ConfigError, match=message):
        ticket_data.load_git_repo(make(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(ConfigError, match="no commits yet"):
        ticket_data.load_git_repo(empty)


def test_replay_scores_each_backend_and_query_kind(repo):
    report = run_tickets(repo=repo, backends=["bm25", "hybrid:embedder=hashing"])
    assert report["kind"] == "tickets" and report["tickets"] == 6 and report["scored"] == 3
    recent, *rows = report["results"]
    assert recent["backend"] == "recent-only (20 newest)" and recent["recall@5"] == 1.0
    assert [(r["backend"], r["query"]) for r in rows] == [
        ("bm25", "start"), ("bm25", "turn"), ("bm25 (related)", "start"), ("bm25 (block)", "start"),
        ("hybrid:embedder=hashing", "start"), ("hybrid:embedder=hashing", "turn"),
        ("hybrid:embedder=hashing (related)", "start"), ("hybrid:embedder=hashing (block)", "start")]
    ranked = [r for r in rows if "(related)" not in r["backend"]]
    for row in rows:
        assert KEYS <= set(row)
        assert 0 <= row["recall@5"] <= row["recall@10"] <= 1 and 0 <= row["mrr@10"] <= 1
        assert row["scored"] == 3
        assert row in rows[2::4] or (0 <= row["block_precision"] <= 1
                                     and row["retrieve_p50_ms"] <= row["retrieve_p95_ms"])
        assert row["index_p50_ms"] <= row["index_p95_ms"]
    # Three docs at most are stored when a ticket is scored: every relevant one is in the top 5
    # (the related list leaves out the newest 20: all of them, so it shows none).
    assert all(r["recall@5"] == 1.0 and r["hit@5"] == 1.0 for r in ranked)
    assert all(r["recall@5"] == 0.0 for r in rows if r not in ranked)
    # The turn query names the changed file: BM25 ranks the login tickets first for ticket 6.
    assert rows[1]["mrr@10"] == 1.0


def test_background_work_finishes_before_the_next_ticket_starts(repo, monkeypatch):
    """sliding_window summarises in a thread: the replay waits for it after each (timed) index,
    as real tickets minutes apart do, so its scores do not hang on thread timing."""
    from backends.sliding_window.backend import SlidingWindowBackend

    calls: list[str] = []
    for name in ("retrieve", "index", "flush"):
        real = getattr(SlidingWindowBackend, name)
        monkeypatch.setattr(SlidingWindowBackend, name,
                            lambda self, *a, _real=real, _name=name, **k: (calls.append(_name),
                                                                          _real(self, *a, **k))[1])
    run_tickets(repo=repo, backends=["sliding_window"])
    # Per ticket: the start and turn queries (and the start block's retrieve on the 3 scored
    # tickets), then index and flush; close() flushes last.
    per_ticket = "-".join(calls[:-1]).split("-index-flush")
    assert per_ticket[-1] == "" and len(per_ticket) == 7
    assert sorted(t.strip("-").count("retrieve") for t in per_ticket[:-1]) == [2, 2, 2, 3, 3, 3]


def test_a_summary_stands_for_the_tickets_whose_docs_it_quotes():
    owners = Owners()
    for pos, doc in enumerate(["Ticket: Add login. Form. Changed: a.py",
                               "Ticket: CSV export. Tables. Changed: b.py",
                               "Ticket: Add login. Form. Changed: a.py"]):
        owners.add(doc, pos)
    summary = "[0 doc] Ticket: Add login.\n[1 doc] Ticket: CSV export."
    assert owners.of(summary) == {0, 1, 2}
    assert owners.of("Ticket: CSV export. Tables. Changed: b.py") == {1}  # a doc: itself only
    assert owners.of("unrelated text") == set()
    assert owners.relevant_share(summary, {1}) == 0.5  # half the docs it quotes


def test_sliding_window_is_scored_on_the_summary_it_returns(tmp_path):
    """From six docs on sliding_window returns one summary of its window: the replay credits
    the tickets it quotes (it scored 0 when only exact docs counted)."""
    tickets = [{"id": str(i), "date": f"2024-01-0{i + 1}T10:00:00+00:00", "title": f"Step {i}",
                "description": f"Work {i}.", "files": [{"path": f"app/m{i}.py"}],
                "refs": [7] if i in (0, 8) else []} for i in range(9)]
    dataset = tmp_path / "history.json"
    dataset.write_text(json.dumps({"name": "h", "tickets": tickets}))
    (_, start, turn, _related, _block) = run_tickets(dataset=dataset, backends=["sliding_window"])["results"]
    assert start["scored"] == 1  # ticket 8, after eight docs: the summary quotes ticket 0
    assert start["recall@5"] == turn["recall@5"] == 1.0
    assert 0 < start["block_precision"] < 1  # one of the eight docs it quotes is relevant


def test_block_precision_counts_the_relevant_characters_the_agent_is_shown():
    docs = ["relevant one", "noise " * 50, "relevant two"]
    owners = Owners()
    for pos, doc in enumerate(docs):
        owners.add(doc, pos)
    block = format_memories([{"docs": docs}], 200)
    share = block_precision(docs, owners, {0, 2}, 200)
    assert block.startswith("Memories invoked:\nrelevant one")
    assert share == pytest.approx(len("\nrelevant one") / len(block))  # doc 3 did not fit
    assert block_precision([], owners, {0}, 200) is None


def test_last_and_before_last_select_the_split():
    history = ticket_data.TicketHistory("h", [ticket_data.HistoryTicket(str(i), "", f"t{i}", "")
                                              for i in range(10)])
    assert [t.id for t in select(history, 3, None)] == ["7", "8", "9"]
    assert [t.id for t in select(history, 3, 4)] == ["3", "4", "5"]
    with pytest.raises(ConfigError, match="leaves nothing"):
        select(history, None, 10)
    with pytest.raises(ConfigError, match="at least 1"):
        select(history, 0, None)


def test_dataset_file_of_the_wrong_shape_names_file_and_key(tmp_path):
    bad = tmp_path / "bad.json"
    for data, message in [([1, 2], "JSON object with a 'tickets' list"),
                          ({"tickets": [{"title": "x"}]}, "ticket 0 has no 'files' key"),
                          ({"tickets": [{"title": "x", "description": "", "files": [],
                                         "refs": ["1"]}]}, "list of issue numbers")]:
        bad.write_text(json.dumps(data))
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            ticket_data.load_ticket_file(bad)


def test_cli_json_has_the_issue_keys_and_errors_are_one_line(repo, tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["bench", "tickets", "--repo", str(repo), "--backend", "bm25",
                               "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert {"dataset", "kind", "results"} <= set(report) and report["kind"] == "tickets"
    assert {r["query"] for r in report["results"]} == {"none", "start", "turn"}
    assert all(KEYS <= set(r) for r in report["results"])
    table = runner.invoke(main, ["bench", "tickets", "--repo", str(repo), "--backend", "bm25",
                                 "--last", "4", "--no-progress"])
    assert table.exit_code == 0 and "hit@5" in table.stdout and "MRR@10" in table.stdout
    for args, message in [(["--repo", str(tmp_path)], "not a git repository"),
                          (["--repo", str(repo), "--dataset", str(tmp_path / "x.json")], "not both"),
                          (["--dataset", str(tmp_path / "x.json")], "does not exist")]:
        failed = runner.invoke(main, ["bench", "tickets", *args, "--backend", "bm25"])
        assert failed.exit_code == 1, failed.output
        lines = [ln for ln in failed.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def _history(tmp_path: Path, refs: list[list[int]]) -> Path:
    """A ticket file, an hour apart, ticket i about "topic i" unless it shares a ref."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
             "juliet", "kilo", "lima"]
    tickets = [{"id": str(i), "date": f"2024-01-01T{i:02d}:00:00+00:00",
                "title": f"Fix {words[r[0]] if r else words[i % len(words)]} {i}",
                "description": f"About {words[r[0]] if r else 'nothing'}.", "files": [],
                "refs": r} for i, r in enumerate(refs)]
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"name": "h", "tickets": tickets}))
    return path


def test_long_range_scores_count_only_related_tickets_older_than_the_window(tmp_path):
    """Ticket 7 relates to 0 (far back) and 6 (just done); with a window of 3 only ticket 0 is
    long-range. The recent-only row (the 3 newest, newest first) finds 6 but never 0."""
    refs = [[1], [], [], [], [], [], [1], [1]]
    report = run_tickets(dataset=_history(tmp_path, refs), backends=["bm25"], window=3)
    assert report["window"] == 3 and report["scored"] == 2 and report["long_scored"] == 2
    recent, start, _turn, related, _block = report["results"]
    assert recent["backend"] == "recent-only (3 newest)" and recent["query"] == "none"
    # Ticket 6: relevant {0}, long {0}; ticket 7: relevant {0, 6}, long {0}.
    assert recent["recall@5"] == pytest.approx((0 + 0.5) / 2)
    assert recent["long_recall@5"] == 0.0 and recent["long_scored"] == 2
    assert start["long_recall@5"] == 1.0 and start["long_scored"] == 2  # BM25 finds "bravo" 0
    assert start["long_hit@5"] == 1.0
    low, high = recent["long_recall@5_ci95"]  # a 95% interval of the mean, for reading differences
    assert low == high == 0.0 and start["long_recall@5_ci95"] == [1.0, 1.0]
    # Each long-range ticket's own R@5, in order: held-out histories pool by joining them.
    assert start["long_recall@5_per_ticket"] == [1.0, 1.0]
    assert recent["long_recall@5_per_ticket"] == [0.0, 0.0]
    # The related list leaves out the newest related_window (20: every earlier ticket here).
    assert related["backend"] == "bm25 (related)" and related["long_recall@5"] == 0.0


def test_the_block_row_scores_everything_the_agent_is_shown_at_ticket_start(tmp_path):
    """Ticket 6 follows ticket 5 on one issue but shares no word with it: no ranking finds it,
    the block's recent work shows it. Ticket 0, on the same issue long ago, is found by its
    words and shown as related work (what a window cannot hold)."""
    def ticket(i: int, title: str, refs: list[int]) -> dict:
        return {"id": str(i), "date": f"2024-01-01T{i:02d}:00:00+00:00", "title": title,
                "description": "", "files": [], "refs": refs}
    titles = ["Zulu exporter writes yankee rows", "Alpha", "Bravo", "Charlie", "Delta",
              "Add the zulu exporter", "Tweak spacing of yankee rows"]
    refs = [[2], [], [], [], [], [2], [2]]
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"name": "h", "tickets": [
        ticket(i, t, r) for i, (t, r) in enumerate(zip(titles, refs))]}))
    report = run_tickets(dataset=path, backends=["bm25"], window=3, recent_tickets=1,
                         related_window=1)
    assert report["recent_tickets"] == 1 and report["related_window"] == 1
    _recent, start, _turn, related, block = report["results"]
    assert related["long_recall@5"] == 1.0  # ticket 0 is older than the one left out
    assert block["backend"] == "bm25 (block)" and block["query"] == "start"
    # Ticket 5: relevant {0}; ticket 6: relevant {0, 5}; ticket 0 is long-range for both.
    assert start["recall@5"] == pytest.approx((1 + 0.5) / 2)  # the ranking misses ticket 5
    assert block["recall@5"] == block["recall@10"] == 1.0  # recent work shows it
    assert block["long_recall@5"] == 1.0 and block["long_scored"] == 2
    assert 0 < block["block_precision"] <= 1
    # No recent work: the block is the ranked part alone.
    flat = run_tickets(dataset=path, backends=["bm25"], window=3, recent_tickets=0)
    assert flat["results"][4]["recall@5"] == pytest.approx((1 + 0.5) / 2)
    out = CliRunner().invoke(main, ["bench", "tickets", "--dataset", str(path), "--backend",
                                    "bm25", "--recent-tickets", "1", "--related-window", "1",
                                    "--json", "--no-progress"])
    assert out.exit_code == 0 and json.loads(out.stdout)["results"][4]["recall@5"] == 1.0


def test_block_layout_says_what_the_block_shows():
    recent = [("Ticket: newest. Changed: a.py", "2024-01-02"), ("Ticket: older. Changed: b.py",
                                                                "2024-01-01")]
    related = ["Ticket: older. Changed: b.py", "Ticket: far back. " + "x" * 3000, "Ticket: never"]
    block = block_layout(recent, related, 1000, 0.4, limit=2)
    assert block.text == format_block(recent, related, 1000, 0.4, limit=2)
    assert block.text == "".join(text for _, text in block.parts)
    assert block.recent_shown == 2  # both fit their share
    assert block.related == [related[1]]  # the recent one is left out; the long one is cut
    assert "Ticket: never" not in block.text  # beyond the limit


def test_window_must_be_at_least_one(tmp_path):
    with pytest.raises(ConfigError, match="at least 1"):
        run_tickets(dataset=_history(tmp_path, [[1], [1]]), backends=["bm25"], window=0)
    out = CliRunner().invoke(main, ["bench", "tickets", "--dataset", str(tmp_path / "none.json"),
                                    "--backend", "bm25", "--window", "0", "--no-progress"])
    assert out.exit_code != 0 and "--window" in out.output and "at least 1" in out.output


@pytest.mark.slow
def test_real_datasette_history_loads(shared_data):
    path = shared_data("tickets/datasette.json")
    history = ticket_data.load_ticket_file(path)
    assert len(history.tickets) == 3374
    relevant = relevant_earlier(select(history, 1500, None))
    # as shared/data/README.md counts them (re-exported 2026-11-27: datasette's own issues only,
    # release commits related to nothing)
    assert sum(1 for r in relevant if r) == 437
    assert sum(1 for r in long_range(relevant, WINDOW) if r) == 66


def test_doc_refs_put_the_issues_in_the_completion_docs_never_in_the_queries(repo):
    """`--doc-refs`: a completed ticket's doc names its issues, as a real ticket's summary does;
    what recall is asked with (the start and turn queries, the labels' side) never does."""
    import dataclasses

    ticket = dataclasses.replace(ticket_data.load_git_repo(repo).tickets[5], refs_in_doc=True)
    assert ticket.completion_doc() == "Ticket: Fix login redirect. and. Changed: app/login.py. Issues: #1."
    assert "#" not in ticket.start_query() + ticket.turn_query()
    no_refs = dataclasses.replace(ticket_data.load_git_repo(repo).tickets[4], refs_in_doc=True)
    assert "Issues" not in no_refs.completion_doc()  # a ticket naming no issue gets nothing
    out = CliRunner().invoke(main, ["bench", "tickets", "--repo", str(repo), "--backend", "bm25",
                                    "--doc-refs", "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["doc_refs"] is True
