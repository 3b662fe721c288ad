"""The dashboard in real headless Chromium: board, a live ticket run on the fake model, memory, token gate."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from orchestrator.server import create_app
from orchestrator.server.live import ServerThread

from browser_helpers import make_project, screenshot, wait

TOKEN = "browser-test-token-0123456789abcdef"


def _text(driver: Any, css: str) -> str:
    """The element's text; live pages swap fragments in, so a stale element is looked up again."""
    for _ in range(20):
        try:
            found = driver.find_elements(By.CSS_SELECTOR, css)
            return found[0].text if found else ""
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"{css} kept being replaced")


def _doc_item(driver: Any, text: str) -> Any:
    for item in driver.find_elements(By.CSS_SELECTOR, ".doc-item"):
        if item.get_attribute("data-doc") == text:
            return item
    return None


def _finish(site: Any, ticket_id: str) -> None:
    """Make sure the ticket has completed (run it through the API if an earlier test did not)."""
    if site.api.get(f"/api/tickets/{ticket_id}").json()["status"] not in ("complete", "merged"):
        run_id = site.api.post(f"/api/tickets/{ticket_id}/run").json()["run_id"]
        with site.api.stream("GET", f"/api/runs/{run_id}/stream", timeout=httpx.Timeout(180)) as stream:
            for line in stream.iter_lines():
                if line == "event: end":
                    break
    assert site.api.get(f"/api/tickets/{ticket_id}").json()["status"] in ("complete", "merged")


@pytest.mark.cli
def test_run_a_ticket_from_the_board_and_watch_it_complete_live(browser, site, claude_cli):
    d = browser
    d.get(site.url + "/")
    assert d.title.startswith("Board")
    d.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    assert d.switch_to.active_element.text == "Skip to content"  # keyboard users start here
    d.find_element(By.CSS_SELECTOR, '[data-status="pending"] a[data-ticket="001-greeting"]').click()
    wait(d, lambda d: d.title.startswith("Add a greeting module"), "the ticket page")
    d.execute_script("window.__sameDocument = true")  # gone if the page reloads
    d.find_element(By.CSS_SELECTOR, 'button[data-action="run"]').send_keys(Keys.ENTER)

    wait(d, lambda d: _text(d, "#ticket-status") == "complete", "the ticket to show complete")
    wait(d, lambda d: "run ended: complete" in _text(d, "#events"), "the live log to show the run's end")
    assert d.execute_script("return window.__sameDocument") is True
    assert "calc/greeting.py" in _text(d, ".turn .prompt")
    assert "Created calc/greeting.py" in _text(d, ".turn .response")
    assert _text(d, ".decision .complete") == "yes"
    events = _text(d, "#events")
    assert "▶ work" in events and "Claude Code ▸ Write" in events and "decision: complete" in events
    assert 'data-action="merge"' in d.page_source and 'data-action="run"' not in d.page_source
    change = _text(d, "#diff")
    assert "calc/greeting.py" in change and "+5" in change and "middle/001-greeting" in change
    assert d.find_elements(By.CSS_SELECTOR, "#diff .highlight .gi")  # added lines, coloured
    screenshot(d, "ticket")
    greeting = site.config.root / "repo" / "calc" / "greeting.py"
    assert not greeting.exists()
    d.find_element(By.CSS_SELECTOR, 'button[data-action="merge"]').send_keys(Keys.ENTER)
    wait(d, lambda d: _text(d, "#ticket-status") == "merged", "the ticket to show merged")
    assert greeting.is_file() and 'data-action="revert"' in d.page_source

    d.get(site.url + "/")
    d.execute_script("window.__sameDocument = true")
    assert site.api.post("/api/tickets/002-farewell/run").status_code == 202  # another client starts it
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-status="complete"] a[data-ticket="002-farewell"]'),
         "the board to move the card to Complete")
    assert d.execute_script("return window.__sameDocument") is True
    card = _text(d, 'a[data-ticket="001-greeting"]')
    assert "1 turn" in card and "$0.0" in card and "ago" in card
    assert "$0.0" in _text(d, 'tr[data-project="calc"]')
    screenshot(d, "board")


@pytest.mark.cli
def test_memory_page_search_add_edit_delete(browser, site, claude_cli):
    _finish(site, "001-greeting")
    d = browser
    d.get(site.url + "/projects/calc/memory")
    box = d.find_element(By.ID, "q")
    box.send_keys("greeting module", Keys.ENTER)
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li"), "search results")
    first = d.find_element(By.CSS_SELECTOR, "#results li")
    assert "Ticket: Add a greeting module." in first.text and "001-greeting" in first.text
    assert float(first.find_element(By.CSS_SELECTOR, ".score").text) > 0
    assert "bm25" in _text(d, "#stat-backend")
    screenshot(d, "memory")

    note, edited = "Hand-written note: the CSV export streams rows.", "Hand-written note: export streams CSV."
    d.find_element(By.ID, "add-text").send_keys(note)
    d.find_element(By.CSS_SELECTOR, "#add-doc button[type=submit]").click()
    wait(d, lambda d: _doc_item(d, note), "the added doc")

    item = _doc_item(d, note)
    assert not item.find_element(By.CSS_SELECTOR, ".edit-form").is_displayed()
    assert not item.find_element(By.CSS_SELECTOR, ".confirm").is_displayed()
    item.find_element(By.CSS_SELECTOR, '[data-action="edit"]').click()
    area = item.find_element(By.CSS_SELECTOR, ".edit-form textarea")
    area.clear()
    area.send_keys(edited)
    item.find_element(By.CSS_SELECTOR, ".edit-form button[type=submit]").click()
    wait(d, lambda d: _doc_item(d, edited) and not _doc_item(d, note), "the edited doc")

    item = _doc_item(d, edited)
    item.find_element(By.CSS_SELECTOR, '[data-action="delete"]').click()
    confirm = item.find_element(By.CSS_SELECTOR, ".confirm")
    assert confirm.is_displayed() and "Delete this doc" in confirm.text  # nothing deleted yet
    assert _doc_item(d, edited) is not None
    confirm.find_element(By.CSS_SELECTOR, '[data-action="confirm-delete"]').click()
    wait(d, lambda d: _doc_item(d, edited) is None, "the doc to be gone")
    texts = [x["text"] for x in site.api.get("/api/projects/calc/memory/docs").json()["docs"]]
    assert edited not in texts and note not in texts and any(t.startswith("Ticket: Add a greeting") for t in texts)


def test_token_gate_login_csrf_and_share_link(browser, tmp_path):
    d = browser
    app = create_app(make_project(tmp_path), fake=True, token=TOKEN)
    with ServerThread(app) as server:
        d.delete_all_cookies()
        d.get(server.url + "/projects/calc/memory")
        assert "/login?next=" in d.current_url and d.title.startswith("Sign in")
        d.find_element(By.ID, "token").send_keys("not-the-token", Keys.ENTER)
        wait(d, lambda d: "not this server" in _text(d, "#login-error"), "the login error")
        screenshot(d, "login")
        d.find_element(By.ID, "token").send_keys(TOKEN, Keys.ENTER)
        wait(d, lambda d: d.current_url.endswith("/projects/calc/memory"), "the page asked for before login")

        d.find_element(By.ID, "add-text").send_keys("Added through a signed-in session.")
        d.find_element(By.CSS_SELECTOR, "#add-doc button[type=submit]").click()  # cookie + CSRF header
        wait(d, lambda d: _doc_item(d, "Added through a signed-in session."), "the doc added with the cookie")

        d.get(server.url + "/tickets/001-greeting")
        share = d.find_element(By.ID, "share-link").get_attribute("href")
        d.delete_all_cookies()
        d.get(share)
        assert "read-only view" in d.page_source and d.title.startswith("Add a greeting module")
        assert not d.find_elements(By.CSS_SELECTOR, "button[data-action]")
        d.get(server.url + "/")
        assert "/login" in d.current_url
