"""Input the server and the CLI once took that reached outside the project: a ticket `path` naming
another repository, a symlink in the ticket folder to a file elsewhere, ticket ids git cannot use
as a branch name (or a command reads as an option)."""

from __future__ import annotations

import subprocess

import pytest
from server_helpers import make_project

from orchestrator.errors import TicketError
from tickets.model import validate_ticket_id
from tickets.source import load_tickets

# Refused ids: git refuses the branch, or a command would read the id as an option.
BAD_IDS = ["a..b", "-rf", "--help", "x.lock", "x.", "a b", "a\x01b", "a~1", "a:b", "a@{1}"]


def _git_takes_branch(tid: str) -> bool:
    """git's own verdict on the branch `middle/<id>` (`git check-ref-format`)."""
    return subprocess.run(["git", "check-ref-format", f"refs/heads/middle/{tid}"],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("tid", BAD_IDS)
def test_an_id_git_cannot_use_is_refused_with_one_line(tid):
    with pytest.raises(TicketError) as refused:
        validate_ticket_id(tid)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"ticket id '{tid}' ")
    assert tid.startswith("-") or not _git_takes_branch(tid)  # git agrees (a leading '-' is ours)


@pytest.mark.parametrize("tid", ["001-greeting", "a.b", "v1.2_fix", "x.locked", "a-", "UPPER"])
def test_ids_git_takes_are_kept(tid):
    assert validate_ticket_id(tid) == tid and _git_takes_branch(tid)


def test_bad_ids_are_refused_at_the_ticket_folder(tmp_path):
    folder, repo = tmp_path / "tickets", tmp_path / "repo"
    folder.mkdir()
    repo.mkdir()
    good = "---\ntitle: T\nproject: p\n---\nDo it.\n"
    (folder / "a..b.md").write_text(good)
    (folder / "-rf.md").write_text(good)
    (folder / "x.lock.md").write_text(good)
    (folder / "fine.md").write_text("---\ntitle: T\nproject: p\nid: --help\n---\nDo it.\n")
    (folder / "ok.md").write_text(good)
    result = load_tickets(folder, repo)
    assert [t.id for t in result.tickets] == ["ok"]
    errors = {e.path.rsplit("/", 1)[1]: e.message for e in result.errors}
    assert errors["a..b.md"].startswith("ticket id 'a..b' holds '..'")
    assert errors["-rf.md"].startswith("ticket id '-rf' starts with '-'")
    assert errors["x.lock.md"].startswith("ticket id 'x.lock' ends with '.lock'")
    assert errors["fine.md"].startswith("ticket id '--help' starts with '-'")
    assert errors["fine.md"].endswith("fix the 'id' field")


def test_a_symlink_out_of_the_ticket_folder_is_refused_naming_it(tmp_path):
    folder, repo, elsewhere = tmp_path / "tickets", tmp_path / "repo", tmp_path / "elsewhere"
    for d in (folder, repo, elsewhere):
        d.mkdir()
    secret = elsewhere / "secret.md"
    secret.write_text("---\ntitle: Secret\nproject: p\n---\nthe machine's other file\n")
    (folder / "001-leak.md").symlink_to(secret)
    (folder / "kept").mkdir()
    (folder / "kept" / "real.md").write_text("---\ntitle: Real\nproject: p\n---\nx\n")
    (folder / "002-alias.md").symlink_to(folder / "kept" / "real.md")  # a link inside the folder is fine
    result = load_tickets(folder, repo)
    assert len(result.errors) == 1 and result.errors[0].path.endswith("001-leak.md")
    assert f"is a symlink to {secret}, outside the ticket folder and the project" in result.errors[0].message
    assert [t.title for t in result.tickets] == ["Real"]


def test_the_api_creates_tickets_of_its_project_only(serve, tmp_path):
    project = make_project(tmp_path)
    other = tmp_path / "other-repo"
    other.mkdir()
    c = serve(project).client
    for path in (str(other), "../other-repo", "/"):
        r = c.post("/api/tickets", json={"title": "X", "project": "calc", "id": "005-x", "path": path})
        assert r.status_code == 400, r.text
        assert "outside this server's project" in r.json()["error"] and "leave 'path' out" in r.json()["error"]
        assert not (tmp_path / "tickets" / "005-x.md").exists()
    inside = c.post("/api/tickets", json={"title": "X", "project": "calc", "id": "005-x", "path": "../repo"})
    assert inside.status_code == 201, inside.text
    for tid in ("a..b", "-rf", "x.lock"):
        r = c.post("/api/tickets", json={"title": "Y", "project": "calc", "id": tid})
        assert r.status_code == 400 and r.json()["error"].startswith(f"ticket id '{tid}'"), r.text


def test_a_new_project_id_on_the_memory_api_is_a_404_unless_created_on_purpose(serve, tmp_path):
    project = make_project(tmp_path)
    c = serve(project).client
    r = c.post("/api/projects/calcc/memory/index", json={"docs": ["a doc"]})
    assert r.status_code == 404, r.text
    assert r.json()["error"] == ("no project 'calcc' here (known: calc): check the project id, "
                                 "or pass ?create=true to start its memory on purpose")
    assert c.post("/api/projects/calcc/memory/docs", json={"text": "a doc"}).status_code == 404
    assert not (tmp_path / ".middle" / "memory" / "calcc").exists()
    assert c.post("/api/projects/calc/memory/index", json={"docs": ["a doc"]}).status_code == 200
    made = c.post("/api/projects/calcc/memory/index", params={"create": "true"}, json={"docs": ["a doc"]})
    assert made.status_code == 200 and c.get("/api/projects/calcc/memory/docs").json()["count"] == 1
    assert c.post("/api/projects/calcc/memory/index", json={"docs": ["another"]}).status_code == 200
