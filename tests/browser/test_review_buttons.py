"""The ticket page's Revert and Discard buttons in real headless Chromium: a revert that conflicts says
where it waits (and, resolved there, the button finishes it); a discard over files git does not
track asks before deleting them."""

from __future__ import annotations

from pathlib import Path

import httpx
from browser_helpers import make_project, wait
from selenium.webdriver.common.by import By
from server_helpers import complete_by_hand

from orchestrator.server import create_app
from orchestrator.server.live import ServerThread
from orchestrator.testing.git import commit_all


def _toasts(driver) -> str:
    return driver.find_element(By.ID, "toast").text


def _press(driver, action: str) -> None:
    """Press the button once it can be pressed (a pressed one waits for the page's refresh), saying
    "yes" to the page's questions (and keeping what it asked). In one step inside the page: the
    live page may swap the button for a fresh copy at any time."""
    wait(driver, lambda d: d.execute_script(
        "const b = document.querySelector(`button[data-action=\"${arguments[0]}\"]`); return b && !b.disabled",
        action), f"the {action} button")
    driver.execute_script(
        "window.__asked = []; window.confirm = (q) => { window.__asked.push(q); return true; };"
        "document.querySelector(`button[data-action=\"${arguments[0]}\"]`).click()", action)


def test_revert_that_conflicts_shows_where_it_waits_then_the_button_finishes_it(browser, tmp_path):
    config = make_project(tmp_path)
    app = create_app(config, fake=True)
    repo = config.root / "repo"
    ops = (repo / "calc" / "ops.py").read_text()
    d = browser
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as api:
        complete_by_hand(app.state.middle, "001-greeting", {"calc/ops.py": ops + "\nGREETING = 'hi'\n"})
        assert api.post("/api/tickets/001-greeting/merge").json()["status"] == "merged"
        (repo / "calc" / "ops.py").write_text(ops + "\nGREETING = 'hi, built on it'\n")
        commit_all(repo, "later work on the ticket's line")
        d.get(server.url + "/tickets/001-greeting")
        _press(d, "revert")
        work = config.root / ".middle" / "reverts" / "001-greeting"
        wait(d, lambda d: f"The revert waits in {work}" in _toasts(d), "the toast to say where the revert waits")
        assert d.find_element(By.CSS_SELECTOR, "#toast .bad").text.startswith("cannot revert ticket 001-greeting")
        assert d.find_element(By.ID, "ticket-status").text == "merged"
        (work / "calc" / "ops.py").write_text(ops)
        commit_all(work, "the resolved revert")
        _press(d, "revert")
        wait(d, lambda d: d.find_element(By.ID, "ticket-status").text == "reverted", "the ticket to be reverted")
        assert (repo / "calc" / "ops.py").read_text() == ops and not work.exists()


def test_discard_over_untracked_files_asks_before_deleting_them(browser, tmp_path):
    config = make_project(tmp_path)
    app = create_app(config, fake=True)
    d = browser
    with ServerThread(app) as server:
        complete_by_hand(app.state.middle, "002-farewell", {"calc/bye.py": "BYE = 1\n"})
        work = Path(app.state.middle.store.latest_run("002-farewell")["worktree"])
        (work / "notes.txt").write_text("the user's own notes\n")
        d.get(server.url + "/tickets/002-farewell")
        _press(d, "discard")
        wait(d, lambda d: d.find_element(By.ID, "ticket-status").text == "discarded", "the ticket to be discarded")
        asked = d.execute_script("return window.__asked")
        assert asked[0].startswith("Discard this ticket's worktree")
        assert "holds files git does not track (notes.txt)" in asked[1] and asked[1].endswith("Delete them too?")
        assert not work.exists()
