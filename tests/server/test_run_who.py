"""Who started a run (issue 38): a run started through the HTTP API records the name of the token
it came with, one started from the board the signed-in name, not the server's OS user; the
run's events, the ticket's API and page, and the board's Memory page (a ticket doc's author)
say so."""

from __future__ import annotations

import re

import httpx
from server_helpers import make_project, wait_for_run

ALICE, BOB, OLD = "a" * 24, "b" * 24, "o" * 24
TICKET = "001-greeting"


def test_a_run_records_the_token_s_name_and_the_board_s_signed_in_name(serve, claude_cli, tmp_path):
    served = serve(make_project(tmp_path), token=OLD, tokens={"alice": ALICE, "bob": BOB})
    alice = httpx.Client(base_url=served.url, timeout=60, headers={"Authorization": f"Bearer {ALICE}"})
    r = alice.post(f"/api/tickets/{TICKET}/run")
    assert r.status_code == 202, r.text
    run = wait_for_run(alice, r.json()["run_id"])
    assert run["status"] == "complete", run
    start = alice.get(f"/api/runs/{run['id']}/events").json()[0]
    assert start["kind"] == "run_start" and start["data"]["by"] == "alice"
    assert alice.get(f"/api/tickets/{TICKET}").json()["runs"][0]["started_by"] == "alice"
    docs = alice.get("/api/projects/calc/memory/docs", params={"ticket": TICKET}).json()["docs"]
    assert docs and docs[0]["tickets"][0]["by"] == "alice"  # the ticket doc's author

    board = httpx.Client(base_url=served.url, timeout=60)  # bob signs in on the board
    assert board.post("/login", data={"token": BOB, "next": "/"}).status_code == 303
    page = board.get(f"/tickets/{TICKET}")
    csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)
    r = board.post(f"/api/tickets/{TICKET}/feedback", json={"text": "also say goodbye"},
                   headers={"X-CSRF-Token": csrf, "X-Middle-Board": "1"})
    assert r.status_code == 202, r.text
    wait_for_run(board, r.json()["run_id"])
    runs = board.get(f"/api/tickets/{TICKET}").json()["runs"]
    assert [x["started_by"] for x in runs] == ["bob", "alice"]  # newest first
    page = board.get(f"/tickets/{TICKET}").text
    assert "started by bob" in page and "started by alice" in page
