"""`middle sync --from github:OWNER/REPO` and `[tickets] kind = "github"` on the fake GitHub API."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing import make_repo
from tickets.model import TicketStatus
from tickets.store import TicketStore


@pytest.fixture
def project(tmp_path, monkeypatch, github):
    """A project whose [github] api_url is the fake; returns its folder."""
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    make_repo(tmp_path / "repo")
    write_config(tmp_path, github.url)
    return tmp_path


def write_config(root: Path, api_url: str, extra: str = "") -> None:
    (root / "middle.toml").write_text(f'[project]\npath = "repo"\nid = "app"\n[github]\napi_url = "{api_url}"\n{extra}')


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def stored(root: Path) -> dict:
    db = root / ".middle" / "middle.sqlite3"
    if not db.exists():
        return {}
    with TicketStore(db) as store:
        return {t.id: t for t in store.list_tickets()}


def one_error(result, *needles: str) -> None:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, result.output
    for needle in needles:
        assert needle in result.output, result.output


def test_sync_reads_every_page_of_open_issues_without_pull_requests(project, github):
    github.max_per_page = 2
    github.add_issue("me/app", "Set up", "Make the project.", labels=["chore"])
    github.add_issue(
        "me/app", "Add login", "Needs the setup.\r\n\r\nDepends on #1\r\n- blocked by #3", labels=["feature"]
    )
    github.add_issue("me/app", "A pull request", pull_request=True)
    github.add_issue("me/app", "Old", state="closed")
    github.add_issue("me/app", "Docs", None)
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert "3 ticket(s)" in result.output and "3 new" in result.output
    tickets = stored(project)
    assert sorted(tickets) == ["gh-1", "gh-2", "gh-5"]
    login = tickets["gh-2"]
    assert login.title == "Add login" and login.description == "Needs the setup."
    assert login.depends_on == ["gh-1"]  # #3 is a pull request: not a ticket to wait for
    assert login.project_id == "app" and login.source == "https://github.example/me/app/issues/2"
    assert login.fields["labels"] == ["feature"] and login.status is TicketStatus.PENDING
    assert tickets["gh-5"].description == ""
    pages = github.requests_to("/repos/me/app/issues")
    assert [r.query.get("page") for r in pages] == [None, "2"]  # 4 open items, 2 a page
    assert pages[0].query["state"] == "open" and pages[0].headers["authorization"] == f"Bearer {github.token}"


def test_dependency_lines_name_issue_numbers(project, github):
    github.add_issue("me/app", "A", "x")
    github.add_issue("me/app", "B", "Depends on #1, #3 and #4\nSee #9 for context\nBlocked by other/repo#5")
    github.add_issue("me/app", "C")
    github.add_issue("me/app", "D")
    assert invoke("sync", "--from", "github:me/app").exit_code == 0
    b = stored(project)["gh-2"]
    assert b.depends_on == ["gh-1", "gh-3", "gh-4"]
    assert "See #9 for context" in b.description and "Depends on" not in b.description


@pytest.mark.parametrize("filtered", [False, True])
def test_a_dependency_on_a_closed_issue_is_done_and_on_a_missing_one_reported(project, github, filtered):
    github.add_issue("me/app", "Done already", state="closed", labels=["x"])
    github.add_issue("me/app", "Open, other label")
    github.add_issue("me/app", "Waits", "Depends on #1\nBlocked by #2\nDepends on #99", labels=["x"])
    result = invoke("sync", "--from", "github:me/app", *(["--label", "x"] if filtered else []))
    # #1 is closed: done; #99 does not exist; #2 is open, so waited for (a ticket once it is synced)
    unknown = "'gh-2', 'gh-99'" if filtered else "'gh-99'"
    assert result.exit_code == 1 and f"depends_on names no ticket: {unknown} (" in result.output, result.output
    assert stored(project)["gh-3"].depends_on == ["gh-2", "gh-99"]
    asked = {r.path for r in github.requests}
    assert "/repos/me/app/issues/1" in asked and "/repos/me/app/issues/99" in asked


def test_resync_is_idempotent_and_uses_etags(project, github):
    github.add_issue("me/app", "One", "body")
    assert invoke("sync", "--from", "github:me/app").exit_code == 0
    stamp = stored(project)["gh-1"].updated_at
    again = invoke("sync", "--from", "github:me/app")
    assert again.exit_code == 0 and "0 new" in again.output
    assert stored(project)["gh-1"].updated_at == stamp  # nothing written
    last = github.requests_to("/repos/me/app/issues")[-1]
    assert last.headers.get("if-none-match") and last.status == 304


def test_a_changed_issue_updates_its_ticket_and_a_closed_one_discards_only_a_pending_ticket(project, github):
    for title in ("Pending", "Running", "Complete", "Renamed"):
        github.add_issue("me/app", title)
    assert invoke("sync", "--from", "github:me/app").exit_code == 0
    with TicketStore(project / ".middle" / "middle.sqlite3") as store:
        assert store.claim_new_run("gh-2", ("pending",)) is not None  # another process's runner has it
        store.set_status("gh-3", TicketStatus.COMPLETE, "done")
    for n in (1, 2, 3):
        github.update_issue("me/app", n, state="closed")
    github.update_issue("me/app", 4, title="Renamed on GitHub", body="new body")
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert "discarded gh-1: issue #1 was closed on GitHub" in result.output
    tickets = stored(project)
    assert tickets["gh-1"].status is TicketStatus.DISCARDED
    assert tickets["gh-2"].status is TicketStatus.RUNNING and tickets["gh-3"].status is TicketStatus.COMPLETE
    assert tickets["gh-4"].title == "Renamed on GitHub" and tickets["gh-4"].description == "new body"
    assert tickets["gh-4"].status is TicketStatus.PENDING

    github.update_issue("me/app", 1, state="open")  # reopened: the ticket is wanted again
    github.update_issue("me/app", 3, state="open")
    again = invoke("sync", "--from", "github:me/app")
    assert again.exit_code == 0 and "pending again gh-1: its issue was reopened" in again.output, again.output
    tickets = stored(project)
    assert tickets["gh-1"].status is TicketStatus.PENDING and tickets["gh-1"].status_reason is None
    assert tickets["gh-3"].status is TicketStatus.COMPLETE  # not discarded by the sync: left as it is


def test_a_ticket_claimed_between_the_read_and_the_write_is_not_discarded(tmp_path):
    from orchestrator.running.sync import Loaded, store_loaded
    from tickets.model import Ticket

    with TicketStore(tmp_path / "s.sqlite3") as store:
        store.upsert_ticket(Ticket(id="gh-1", project_id="app", title="T", project_path=str(tmp_path)))
        loaded = Loaded(closed={"gh-1": "issue #1 was closed on GitHub"})  # read while pending
        store.claim_new_run("gh-1", ("pending",))  # then a runner claims it
        assert store_loaded(store, loaded).discarded == []
        assert store.get_ticket("gh-1").status is TicketStatus.RUNNING


def test_label_and_milestone_filters_are_sent(project, github):
    github.add_issue("me/app", "Bug v1", labels=["bug", "p1"], milestone="v1")
    github.add_issue("me/app", "Bug", labels=["bug", "p1"])
    github.add_issue("me/app", "Feature v1", milestone="v1")
    result = invoke("sync", "--from", "github:me/app", "--label", "bug", "--label", "p1", "--milestone", "v1")
    assert result.exit_code == 0, result.output
    assert sorted(stored(project)) == ["gh-1"]
    sent = github.requests_to("/repos/me/app/issues")[-1].query
    assert sent["labels"] == "bug,p1" and sent["milestone"] == "1"
    unknown = invoke("sync", "--from", "github:me/app", "--milestone", "v9")
    one_error(unknown, "no milestone 'v9' in me/app", "'v1'")


def test_the_configured_source_and_middle_tickets_show_where_tickets_came_from(project, github):
    write_config(
        project, github.url, '[tickets]\nkind = "github"\n[tickets.options]\nrepo = "me/app"\nlabels = ["bug"]\n'
    )
    github.add_issue("me/app", "Crash on empty input", labels=["bug"])
    github.add_issue("me/app", "Not a bug")
    assert invoke("sync").exit_code == 0
    listed = invoke("tickets")
    assert listed.exit_code == 0, listed.output
    assert "gh-1" in listed.output and "me/app#1" in listed.output and "gh-2" not in listed.output


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "case, needles",
    [
        ("no token", ["no GitHub token: set GITHUB_TOKEN"]),
        ("bad repo", ["bad GitHub repository 'me'", "OWNER/REPO"]),
        ("401", ["GitHub refused the token in GITHUB_TOKEN (401"]),
        ("404", ["GitHub has no repository me/nope"]),
        ("closed port", ["cannot reach GitHub at http://127.0.0.1:"]),
        ("500 on page 2", ["GitHub answered 500"]),
        ("rate limit for an hour", ["rate limit for this token is used up"]),
    ],
)
def test_each_mistake_is_one_error_line_and_nothing_is_synced(project, github, monkeypatch, case, needles):
    github.max_per_page = 1
    github.add_issue("me/app", "One")
    github.add_issue("me/app", "Two")
    repo = "me/app"
    if case == "no token":
        monkeypatch.delenv("GITHUB_TOKEN")
    elif case == "bad repo":
        repo = "me"
    elif case == "401":
        monkeypatch.setenv("GITHUB_TOKEN", "expired")
    elif case == "404":
        repo = "me/nope"
    elif case == "closed port":
        write_config(project, f"http://127.0.0.1:{_closed_port()}")
    elif case == "500 on page 2":
        github.fail(500, path="/repos/me/app/issues", times=None)
        github.heal()
        github.requests.clear()
        original = github.handle

        def second_page_fails(req, base):
            if req.query.get("page") == "2":
                return 500, {}, {"message": "Server Error"}
            return original(req, base)

        monkeypatch.setattr(github, "handle", second_page_fails)
    elif case == "rate limit for an hour":
        github.exhaust_rate_limit(reset_in=3600)
    result = invoke("sync", "--from", f"github:{repo}")
    one_error(result, *needles)
    assert stored(project) == {}  # not one ticket of the first page


def test_a_used_up_rate_limit_is_waited_out_and_said(project, github):
    github.add_issue("me/app", "One")
    github.exhaust_rate_limit(reset_in=1, status=429)
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert "GitHub's rate limit is used up: waiting" in result.output
    assert sorted(stored(project)) == ["gh-1"]
    assert [r.status for r in github.requests_to("/repos/me/app/issues")] == [429, 200]


@pytest.mark.parametrize("content", ["not json{", json.dumps({"version": 1, "api": "x", "entries": []}), "POISON"])
def test_the_etag_cache_is_untrusted(project, github, content):
    github.add_issue("me/app", "One", "real body")
    assert invoke("sync", "--from", "github:me/app").exit_code == 0
    cache = project / ".middle" / "github" / "me__app.json"
    data = json.loads(cache.read_text())
    if content == "POISON":  # the right ETag with a body GitHub never gives: fetched again
        for entry in data["entries"].values():
            entry["body"] = {"not": "a list"}
        content = json.dumps(data)
    cache.write_text(content)
    github.update_issue("me/app", 1, body="changed body")
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert stored(project)["gh-1"].description == "changed body"


def test_a_5xx_blip_on_a_read_is_tried_again_and_said(project, github):
    github.add_issue("me/app", "One")
    github.fail(502, path="/repos/me/app/issues", times=2)
    result = invoke("sync", "--from", "github:me/app")
    assert result.exit_code == 0, result.output
    assert result.output.count("GitHub did not answer GET /repos/me/app/issues (502") == 2, result.output
    assert sorted(stored(project)) == ["gh-1"]
    assert [r.status for r in github.requests_to("/repos/me/app/issues")] == [502, 502, 200]


def test_a_read_that_keeps_failing_stops_after_three_tries(project, github):
    github.add_issue("me/app", "One")
    github.fail(503, path="/repos/me/app/issues")
    result = invoke("sync", "--from", "github:me/app")
    one_error(result, "GitHub answered 503")
    assert len(github.requests_to("/repos/me/app/issues")) == 3
    assert stored(project) == {}


@pytest.mark.parametrize("status", [410, 404])
def test_a_deleted_issue_discards_its_pending_ticket_once_and_every_command_goes_on(
    project, github, monkeypatch, status
):
    write_config(project, github.url, '[tickets]\nkind = "github"\n[tickets.options]\nrepo = "me/app"\n')
    github.add_issue("me/app", "Deleted soon")
    github.add_issue("me/app", "Stays")
    assert invoke("sync").exit_code == 0
    github.delete_issue("me/app", 1, status=status)
    gone = "discarded gh-1: issue #1 is gone from GitHub (deleted, or no longer visible to the token)"

    from orchestrator.running import batch

    started: list[list[str]] = []
    monkeypatch.setattr(batch, "run_batch", lambda orch, ids, **kw: started.append(list(ids)) or batch.BatchResult())
    listed = invoke("tickets")
    assert listed.exit_code == 0 and "is gone from GitHub" in listed.output, listed.output
    run = invoke("run")
    assert run.exit_code == 0 and gone in run.output, run.output
    assert started == [["gh-2"]]
    ticket = stored(project)["gh-1"]
    assert ticket.status is TicketStatus.DISCARDED and "issue #1 is gone from GitHub" in ticket.status_reason
    again = invoke("sync")
    assert again.exit_code == 0 and "discarded" not in again.output, again.output  # said once
    assert invoke("tickets").exit_code == 0


def test_the_server_goes_on_past_a_deleted_issue(project, github):
    from fastapi.testclient import TestClient

    from orchestrator.config.settings import load_config
    from orchestrator.server import create_app

    write_config(project, github.url, '[tickets]\nkind = "github"\n[tickets.options]\nrepo = "me/app"\n')
    github.add_issue("me/app", "Deleted soon")
    assert invoke("sync").exit_code == 0
    github.delete_issue("me/app", 1)
    app = create_app(load_config(project / "middle.toml"), fake=True)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        tickets = client.get("/api/tickets").json()["tickets"]
    assert [(t["id"], t["status"]) for t in tickets] == [("gh-1", "discarded")]


def test_a_repository_that_answers_404_stays_that_error_when_an_issue_is_asked_for(project, github, monkeypatch):
    github.add_issue("me/app", "One")
    assert invoke("sync", "--from", "github:me/app").exit_code == 0
    github.update_issue("me/app", 1, state="closed")  # not listed: the sync asks for issue #1 itself
    original = github.handle

    def repository_gone(req, base):  # the list still answers (a stale mirror); the rest is 404
        if req.path in ("/repos/me/app", "/repos/me/app/issues/1"):
            return 404, {}, {"message": "Not Found"}
        return original(req, base)

    monkeypatch.setattr(github, "handle", repository_gone)
    one_error(invoke("sync", "--from", "github:me/app"), "GitHub has no repository me/app")
    assert stored(project)["gh-1"].status is TicketStatus.PENDING
