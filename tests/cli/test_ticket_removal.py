"""A ticket file removed from the folder: every sync discards its pending ticket once, saying why;
a running or finished one is left alone; the file coming back makes it pending again. `middle
discard` marks a pending ticket that never ran. Through the CLI (sync, run, tickets) and the server."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from orchestrator.cli.main import main
from tickets.model import TicketStatus
from tickets.store import TicketStore

GONE = "its file tickets/{name}.md is gone from the ticket folder"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def ticket(root: Path, name: str, depends_on: str = "") -> None:
    deps = f"\ndepends_on: [{depends_on}]" if depends_on else ""
    (root / "tickets" / f"{name}.md").write_text(f"---\ntitle: {name.title()}\nproject: demo{deps}\n---\nDo it.\n")


def stored(root: Path) -> dict:
    with TicketStore(root / ".middle" / "middle.sqlite3") as store:
        return {t.id: t for t in store.list_tickets()}


def row(output: str, ticket_id: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(f"│ {ticket_id} "))


def test_a_removed_file_discards_its_pending_ticket_once_and_its_return_makes_it_pending(project_dir, started):
    for name in ("keep", "gone", "ran", "done"):
        ticket(project_dir, name)
    assert invoke("sync").exit_code == 0
    with TicketStore(project_dir / ".middle" / "middle.sqlite3") as store:
        assert store.claim_new_run("ran", ("pending",)) is not None  # another process runs it
        store.set_status("done", TicketStatus.COMPLETE, "done")  # its work is on its branch
    for name in ("gone", "ran", "done"):
        (project_dir / "tickets" / f"{name}.md").unlink()

    listed = invoke("tickets")  # read-only: shown as the next sync stores it, nothing written
    assert listed.exit_code == 0, listed.output
    assert "discarded" in row(listed.output, "gone") and "its file tickets/gone.md is gone" in row(
        listed.output, "gone"
    )
    assert stored(project_dir)["gone"].status is TicketStatus.PENDING

    first = invoke("run")
    assert first.exit_code == 0, first.output
    assert f"discarded gone: {GONE.format(name='gone')}" in first.output
    assert started == [["keep"]]  # not the removed one
    tickets = stored(project_dir)
    assert tickets["gone"].status is TicketStatus.DISCARDED and tickets["gone"].status_reason == GONE.format(
        name="gone"
    )
    assert tickets["ran"].status is TicketStatus.RUNNING and tickets["done"].status is TicketStatus.COMPLETE
    again = invoke("sync")
    assert again.exit_code == 0 and "discarded" not in again.output, again.output  # said once

    ticket(project_dir, "gone")  # the file is back: the ticket is wanted again
    back = invoke("sync")
    assert back.exit_code == 0 and "pending again gone: its file is back in the ticket folder" in back.output
    assert (
        stored(project_dir)["gone"].status is TicketStatus.PENDING and stored(project_dir)["gone"].status_reason is None
    )


def test_a_file_that_now_gives_another_id_discards_the_old_one_and_a_broken_one_is_kept(project_dir):
    ticket(project_dir, "old")
    ticket(project_dir, "edited")
    assert invoke("sync").exit_code == 0
    (project_dir / "tickets" / "old.md").write_text("---\ntitle: Old\nproject: demo\nid: new\n---\nDo it.\n")
    (project_dir / "tickets" / "edited.md").write_text("---\ntitle: [half typed\n---\n")  # mid-edit
    result = invoke("sync")
    assert "discarded old: its file tickets/old.md now gives another ticket id" in result.output, result.output
    tickets = stored(project_dir)
    assert tickets["new"].status is TicketStatus.PENDING
    assert tickets["edited"].status is TicketStatus.PENDING  # its file did not load: left as it was


def test_dependency_problems_of_live_tickets_are_still_reported_and_removed_ones_are_not(project_dir):
    ticket(project_dir, "x", "y")
    ticket(project_dir, "y", "x")
    assert invoke("sync").exit_code == 1  # a cycle: reported
    for name in ("x", "y"):
        (project_dir / "tickets" / f"{name}.md").unlink()
    ticket(project_dir, "p", "q")
    ticket(project_dir, "q", "p")
    ticket(project_dir, "r", "nosuch")
    result = invoke("sync")
    assert result.exit_code == 1
    assert "cycle (p → q → p)" in result.output and "names no ticket: 'nosuch'" in result.output, result.output
    assert "x → y" not in result.output and "y → x" not in result.output  # removed: discarded, not reported
    assert {stored(project_dir)[t].status for t in ("x", "y")} == {TicketStatus.DISCARDED}
    listed = invoke("tickets")
    assert "cycle (p → q → p)" in listed.output and "x → y" not in listed.output


def test_no_ticket_folder_discards_nothing(project_dir):
    ticket(project_dir, "a")
    assert invoke("sync").exit_code == 0
    (project_dir / "tickets" / "a.md").unlink()
    (project_dir / "tickets").rmdir()  # the folder itself: the store's tickets are used as they are
    result = invoke("sync")
    assert result.exit_code == 0 and "no such ticket folder" in result.output, result.output
    assert stored(project_dir)["a"].status is TicketStatus.PENDING


def test_discard_marks_a_pending_ticket_that_never_ran(project_dir, started):
    ticket(project_dir, "a")
    ticket(project_dir, "b")
    assert invoke("sync").exit_code == 0
    result = invoke("discard", "a")
    assert result.exit_code == 0, result.output
    assert "discarded ticket a: it never ran" in result.output
    assert stored(project_dir)["a"].status is TicketStatus.DISCARDED
    assert invoke("run").exit_code == 0 and started == [["b"]]  # the file stays; the ticket is not run
    assert "already discarded" in invoke("discard", "a").output


def test_the_board_and_api_show_a_removed_ticket_discarded(project_dir):
    from fastapi.testclient import TestClient

    from orchestrator.config.settings import load_config
    from orchestrator.server import create_app

    ticket(project_dir, "a")
    ticket(project_dir, "b")
    assert invoke("sync").exit_code == 0
    (project_dir / "tickets" / "b.md").unlink()
    with TestClient(
        create_app(load_config(project_dir / "middle.toml"), fake=True), base_url="http://127.0.0.1"
    ) as client:
        tickets = {t["id"]: t for t in client.get("/api/tickets").json()["tickets"]}
    assert tickets["a"]["status"] == "pending" and tickets["b"]["status"] == "discarded"
    assert stored(project_dir)["b"].status_reason == GONE.format(name="b")


def test_a_deleted_ticket_of_a_dependency_cycle_is_never_suggested_and_the_hints_end(project_dir):
    """The hints once went round (run a: run b; run b: run c; run c: run a) and named a ticket
    whose file was gone: now they end at the one fix, the depends_on naming the gone ticket."""
    ticket(project_dir, "a", "b")
    ticket(project_dir, "b", "c")
    ticket(project_dir, "c", "a")
    invoke("sync")
    (project_dir / "tickets" / "a.md").unlink()
    assert invoke("sync").exit_code == 0
    gone = project_dir / "tickets" / "a.md"
    said = invoke("run", "a")
    assert said.exit_code == 1 and said.output.strip() == (
        f"error: ticket 'a' was discarded ({GONE.format(name='a')}): put {gone} back in the ticket "
        "folder to run it again (a sync makes it pending)")
    assert "start it with `middle run c`" in invoke("run", "b").output
    said = invoke("run", "c")
    assert said.exit_code == 1 and said.output.strip() == (
        f"error: ticket 'c' waits for a (discarded); a's file {gone} is gone: remove 'a' from the "
        "depends_on of 'c', or put the file back")
    assert "middle run a" not in said.output
