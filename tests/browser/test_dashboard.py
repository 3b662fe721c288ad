"""The dashboard in real headless Chromium: board, a live ticket run on the fake model, parallel runs,
memory, token gate."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from browser_helpers import LAPTOP, PHONE, Stall, decide, make_project, plan, screenshot, wait
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from orchestrator.fake_api.scripted import ScriptedResponder
from orchestrator.server import create_app
from orchestrator.server.live import ServerThread
from orchestrator.services import Services

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
    # Looked up inside the page in one step: the page reloads after an edit, and an element found
    # before the reload cannot be read after it.
    return driver.execute_script("return Array.from(document.querySelectorAll('.doc-item'))"
                                 ".find((item) => item.dataset.doc === arguments[0]) || null", text)


def _cells(driver: Any, css: str) -> list[str]:
    """The texts of every element matching css, read inside the page in one step."""
    return list(driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.innerText.trim())", css))


def _cards(driver: Any, status: str) -> set[str]:
    """The ticket ids in one board column, read in one step (the board swaps fragments in live)."""
    return set(driver.execute_script(
        "return Array.from(document.querySelectorAll(`[data-status=\"${arguments[0]}\"] a[data-ticket]`),"
        " (a) => a.dataset.ticket)", status))


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
    wait(d, lambda d: _text(d, "#live-state") == "· run ended: complete", "the events panel to say the run ended")
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
    assert "1 turn" in card and "offline" in card and "ago" in card  # the fake model's runs cost nothing
    # The board swaps its fragments in one by one: the totals row may still be on its way (and an
    # element found a moment ago may be gone), so its cells are read in one step until they agree.
    done = ["3", "2", "0", "0", "$0.0000", "$0.0000", "2"]  # merged and complete: done; 2 offline runs
    wait(d, lambda d: _cells(d, 'tr[data-project="calc"] td') == done, "the totals row to count both runs")
    screenshot(d, "board")


@pytest.mark.cli
def test_the_board_shows_every_running_ticket_while_two_run_at_once(browser, tmp_path, claude_cli):
    held = Stall()  # both Claude Code turns wait here, so both tickets are running at once
    script = ScriptedResponder().agent(plan("Say hello."), plan("Say goodbye.")).coding_agent(held, held)
    script.agent(decide(True, "Said it."), decide(True, "Said it."))
    config = make_project(tmp_path, parallel=2)
    services = Services(config, fake=True, responder=script)
    app = create_app(config, services=services)
    both = {"001-greeting", "002-farewell"}
    d = browser
    try:
        with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as api:
            d.get(server.url + "/")
            d.execute_script("window.__sameDocument = true")
            started = [api.post(f"/api/tickets/{t}/run").json() for t in sorted(both)]
            assert [s["status"] for s in started] == ["running", "running"]  # [run] parallel = 2: none queued
            assert held.wait_for(2), "the two turns did not both start"
            wait(d, lambda d: _cards(d, "running") == both, "both tickets in the Running column")
            assert "2" in _text(d, '.jump a[data-column="running"] .count')
            screenshot(d, "board-running")
            held.release.set()
            wait(d, lambda d: both <= _cards(d, "complete") and not _cards(d, "running"),
                 "both tickets to move to Complete")
            assert d.execute_script("return window.__sameDocument") is True  # updated live, no reload
    finally:
        held.release.set()
        app.state.middle.runs.join(timeout=180)
        services.close()


@pytest.mark.cli
def test_memory_page_search_add_edit_delete(browser, site, claude_cli):
    _finish(site, "001-greeting")
    # A few more memories, so bm25 (whose word weights need a corpus) ranks by more than chance.
    site.api.post("/api/projects/calc/memory/index", json={"docs": [
        "Ticket: Fix login. Users could not sign in. Reset the session cookie.",
        "Ticket: Speed up export. Export was slow. Streamed the CSV rows.",
        "Ticket: Parser crash. Fixed the tokenizer on empty input."]})
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
    assert confirm.is_displayed() and "Forget doc" in confirm.text  # nothing deleted yet
    assert _doc_item(d, edited) is not None
    confirm.find_element(By.CSS_SELECTOR, '[data-action="confirm"]').click()
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
        # The share link sets its cookie and redirects: the page is read once it has loaded
        # (right after get(), a loaded machine can still show the empty page in between).
        wait(d, lambda d: "read-only view" in d.page_source, "the shared read-only page")
        assert d.title.startswith("Add a greeting module")
        assert not d.find_elements(By.CSS_SELECTOR, "button[data-action]")
        d.get(server.url + "/")
        assert "/login" in d.current_url


def _styled(box: dict[str, Any] | None) -> dict[str, Any] | None:
    """The measured box once its numbers are numbers (None, to wait on, while they are not)."""
    return box if box is not None and box.get("lines") is not None else None


def _fits(driver: Any, css: str) -> bool:
    """Every element matching css lies within the window's width (nothing cut off at the side)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".every((el) => el.getBoundingClientRect().right <= document.documentElement.clientWidth)", css)


@pytest.mark.cli
def test_board_fits_a_laptop_and_a_phone_and_new_ticket_is_at_the_top(browser, site, claude_cli):
    d = browser
    d.set_window_size(*LAPTOP)
    d.get(site.url + "/")
    assert _fits(d, ".column") and _fits(d, ".totals table")  # all nine columns, none clipped
    d.set_window_size(*PHONE)
    assert _fits(d, ".column") and _fits(d, ".totals tr")  # stacked; the totals one block per project
    assert d.execute_script("const w = document.querySelector('.totals .table-wrap');"
                            " return w.scrollWidth <= w.clientWidth")
    d.set_window_size(*LAPTOP)

    opener = d.find_element(By.ID, "new-ticket-open")
    assert opener.location["y"] < 200  # at the top, not below the board
    opener.click()
    dialog = d.find_element(By.ID, "new-ticket")
    assert dialog.is_displayed() and d.switch_to.active_element.get_attribute("id") == "nt-title"
    d.switch_to.active_element.send_keys("Document the calculator")
    d.find_element(By.ID, "nt-description").send_keys(
        "## Steps\n\n- write **docs/calc.md**\n- link https://example.com/style\n\n"
        "<img src=x onerror=\"window.__xss = 1\"> [click](javascript:window.__xss=2)")
    d.find_element(By.CSS_SELECTOR, "#new-ticket-form button[type=submit]").click()
    wait(d, lambda d: d.title.startswith("Document the calculator"), "the new ticket's page")
    description = d.find_element(By.CSS_SELECTOR, ".description .md")
    assert description.find_element(By.TAG_NAME, "h4").text == "Steps"
    assert description.find_element(By.TAG_NAME, "strong").text == "docs/calc.md"
    links = [a.get_attribute("href") for a in description.find_elements(By.TAG_NAME, "a")]
    assert links == ["https://example.com/style"]
    assert not description.find_elements(By.TAG_NAME, "img") and "<img src=x" in description.text
    assert d.execute_script("return window.__xss === undefined")
    assert _text(d, "#live-state") == "· no run yet"


def test_a_full_board_scrolls_sideways_with_a_way_to_every_column(browser, tmp_path):
    from orchestrator.server.pages import STATUSES

    app = create_app(make_project(tmp_path), fake=True)
    d = browser
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as api:
        for status in STATUSES:  # a card in every column
            tid = api.post("/api/tickets", json={"title": f"A ticket that is {status}", "project": "calc",
                                                 "id": f"x-{status}"}).json()["id"]
            app.state.middle.store.set_status(tid, status)
        d.set_window_size(*LAPTOP)
        d.get(server.url + "/")
        row = d.find_element(By.ID, "columns")
        assert d.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth", row)
        wait(d, lambda d: "more-right" in d.find_element(By.ID, "board-scroll").get_attribute("class"),
             "the shade that says more columns are to the right")
        screenshot(d, "board-full")
        d.set_window_size(*LAPTOP)
        d.find_element(By.CSS_SELECTOR, '.jump a[data-column="discarded"]').click()
        wait(d, lambda d: d.execute_script(
            "const r = document.getElementById('columns').getBoundingClientRect();"
            " const c = document.querySelector('[data-status=discarded]').getBoundingClientRect();"
            " return c.left >= r.left - 1 && c.right <= r.right + 1"), "the last column scrolled into view")
        assert "more-left" in d.find_element(By.ID, "board-scroll").get_attribute("class")
        assert d.switch_to.active_element.get_attribute("id") == "col-discarded"


def test_a_very_long_title_stays_inside_its_card_column_and_ticket_heading(browser, tmp_path):
    title = "Make the calculator " + "much better " * 830  # ~10,000 characters
    app = create_app(make_project(tmp_path), fake=True)
    d = browser
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as api:
        tid = api.post("/api/tickets", json={"title": title, "project": "calc", "id": "long"}).json()["id"]
        for size in (LAPTOP, PHONE):
            d.set_window_size(*size)
            d.get(server.url + "/")
            # Measured once the page is styled: the board reloads itself when the new ticket's
            # event arrives, and a page caught mid-reload has no line height yet (NaN -> None).
            box = wait(d, lambda drv: _styled(drv.execute_script(
                "const card = document.querySelector('[data-ticket=long]');"
                " if (!card) return null;"
                " const col = card.closest('.column').getBoundingClientRect(), c = card.getBoundingClientRect();"
                " const t = card.querySelector('.card-title');"
                " return {inside: c.left >= col.left && c.right <= col.right && c.bottom <= col.bottom,"
                " lines: t.getBoundingClientRect().height / parseFloat(getComputedStyle(t).lineHeight)}")),
                "the long ticket's card, styled")
            assert box["inside"] and box["lines"] <= 3.1, (size, box)
        d.set_window_size(*LAPTOP)
        d.get(f"{server.url}/tickets/{tid}")
        lines = wait(d, lambda drv: drv.execute_script(
            "const h = document.querySelector('.ticket-head h1');"
            " return h ? h.getBoundingClientRect().height / parseFloat(getComputedStyle(h).lineHeight) : null"
        ), "the ticket's heading, styled")
        assert lines <= 3.1
        assert _fits(d, ".ticket-head") and len(d.title) < 100
        full = d.find_element(By.CSS_SELECTOR, ".full-title")
        full.find_element(By.TAG_NAME, "summary").click()
        assert full.find_element(By.TAG_NAME, "p").get_attribute("textContent") == title.strip()
