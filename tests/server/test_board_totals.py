"""The board's totals: complete and merged tickets are done; offline runs (the fake model) cost nothing."""

from __future__ import annotations

import re

HTML = {"Accept": "text/html"}


def _ran(store, ticket_id: str, cost: float, *, offline: bool) -> str:
    """One finished run of one turn costing `cost` (as the model reported it)."""
    run_id = store.claim_new_run(ticket_id, ["pending"])
    assert run_id is not None
    if offline:
        store.set_run_fields(run_id, offline=1)
    store.start_turn(run_id, 1, "Create calc/x.py", None, False)
    store.finish_turn(run_id, 1, response="Created calc/x.py.", is_error=False, error=None, cost_usd=cost,
                      duration_ms=5, usage={}, num_turns=1)
    store.end_run(ticket_id, run_id, "complete")
    return run_id


def test_merged_is_done_and_offline_runs_add_no_cost(server):
    store = server.state.store
    server.state.sync_folder()
    _ran(store, "001-greeting", 0.25, offline=False)
    store.set_status("001-greeting", "merged")
    _ran(store, "002-farewell", 0.75, offline=True)  # complete, on the fake model

    totals = server.client.get("/api/projects").json()
    assert totals == [{"project": "calc", "tickets": 3, "done": 2, "failed": 0, "running": 0, "pending": 1,
                       "cost_today_usd": 0.25, "cost_total_usd": 0.25, "offline_runs": 1}]
    offline = server.client.get("/api/tickets/002-farewell").json()
    assert offline["cost_usd"] == 0 and offline["offline_runs"] == 1
    assert server.client.get("/api/tickets/001-greeting").json()["cost_usd"] == 0.25

    board = server.client.get("/", headers=HTML).text
    row = re.search(r'<tr data-project="calc">.*?</tr>', board, re.S).group(0)
    cells = re.findall(r'<td data-label="([^"]+)"[^>]*>(.*?)</td>', row, re.S)
    assert dict(cells) == {"Tickets": "3", "Done": "2", "Failed": "0", "Running": "0",
                           "Cost today": "$0.2500", "Cost all time": "$0.2500", "Offline runs": "1"}
    card = re.search(r'data-ticket="002-farewell">.*?</a>', board, re.S).group(0)
    assert "$0.7500" not in card and "offline" in card
