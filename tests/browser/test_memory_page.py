"""The board's Memory page in real headless Chromium (issue 31): a person finds a wrong memory,
sees where it came from, edits it, supersedes it, pins one, forgets one (each destructive step
asked first) and undoes a change; every step is in the change record with who made it."""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest
from browser_helpers import make_project, screenshot, wait
from conftest import Site
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from orchestrator.memory.format import doc_id
from orchestrator.server import create_app
from orchestrator.server.live import ServerThread

WRONG = "Ticket: Session timeout. Sessions expire after 1 day; the cookie is not signed."
FIXED = "Ticket: Session timeout. Sessions expire after 7 days; the cookie is signed."
NEWER = "Ticket: Session timeout. Sessions now use JWT tokens instead of cookies."
OTHER = "Ticket: Export. The CSV export streams rows from the orders table."


@pytest.fixture
def memory_site(tmp_path) -> Iterator[Any]:
    app = create_app(make_project(tmp_path), fake=True)
    with ServerThread(app) as thread, httpx.Client(base_url=thread.url, timeout=60) as api:
        yield Site(thread.url, api, None)


def item(driver: Any, ident: str) -> Any:
    return driver.execute_script("return document.querySelector(`.doc-item[data-id='${arguments[0]}']`)",
                                 ident)


def click(driver: Any, ident: str, action: str) -> Any:
    found = item(driver, ident)
    found.find_element(By.CSS_SELECTOR, f'[data-action="{action}"]').click()
    return found


def test_find_show_edit_supersede_pin_forget_and_undo_on_the_memory_page(browser, memory_site):
    api, d = memory_site.api, browser
    for text in (WRONG, OTHER):
        assert api.post("/api/projects/calc/memory/docs", json={"text": text}).status_code == 200
    wrong, fixed, newer, other = (doc_id(t)[:8] for t in (WRONG, FIXED, NEWER, OTHER))
    d.get(memory_site.url + "/projects/calc/memory")
    d.find_element(By.ID, "q").send_keys("session cookie expire", Keys.ENTER)
    wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li .why"), "search results with why")
    first = d.find_element(By.CSS_SELECTOR, "#results li")
    assert WRONG in first.text and "why: keywords session" in first.text

    click(d, wrong, "show")  # where it came from, and its changes
    wait(d, lambda d: item(d, wrong).find_element(By.CSS_SELECTOR, ".show-box").is_displayed(), "show")
    shown = item(d, wrong).find_element(By.CSS_SELECTOR, ".show-box").text
    assert "from: added through the HTTP API" in shown or "from: added by hand" in shown
    assert "change 1" in shown

    found = click(d, wrong, "edit")
    area = found.find_element(By.CSS_SELECTOR, ".edit-form textarea")
    area.clear()
    area.send_keys(FIXED)
    found.find_element(By.CSS_SELECTOR, ".edit-form button[type=submit]").click()
    wait(d, lambda d: item(d, fixed) is not None and item(d, wrong) is None, "the edited doc")

    found = click(d, fixed, "supersede")
    found.find_element(By.CSS_SELECTOR, ".supersede-form textarea").send_keys(NEWER)
    found.find_element(By.CSS_SELECTOR, ".supersede-form button[type=submit]").click()
    wait(d, lambda d: item(d, newer) is not None, "the superseding doc")
    assert f"superseded by {newer}" in item(d, fixed).text  # kept, marked as history

    click(d, other, "pin")
    wait(d, lambda d: "pinned" in item(d, other).text, "the pin")

    found = click(d, other, "delete")  # destructive: asked first, nothing gone yet
    confirm = found.find_element(By.CSS_SELECTOR, ".confirm")
    assert confirm.is_displayed() and f"Forget doc {other}?" in confirm.text and item(d, other)
    confirm.find_element(By.CSS_SELECTOR, '[data-action="confirm"]').click()
    wait(d, lambda d: item(d, other) is None, "the forgotten doc gone")
    screenshot(d, "memory-curation")

    changes = d.find_elements(By.CSS_SELECTOR, "#changes .change-item")
    assert [c.get_attribute("data-change") for c in changes] == ["6", "5", "4", "3", "2", "1"]
    assert "deleted" in changes[0].text and "board " in changes[0].text
    changes[0].find_element(By.CSS_SELECTOR, '[data-action="undo"]').click()
    confirm = changes[0].find_element(By.CSS_SELECTOR, ".confirm")
    assert confirm.is_displayed() and "Undo change 6?" in confirm.text
    confirm.find_element(By.CSS_SELECTOR, '[data-action="confirm-undo"]').click()
    wait(d, lambda d: item(d, other) is not None and "pinned" in item(d, other).text,
         "the forgotten doc back, still pinned")
    docs = [x["text"] for x in api.get("/api/projects/calc/memory/docs").json()["docs"]]
    assert sorted(docs) == sorted([FIXED, NEWER, OTHER])
    who = [c["who"] for c in api.get("/api/projects/calc/memory/changes").json()["changes"]]
    assert who[0].startswith("board ") and who[-1].startswith("api ")


# -- issue 38: the page at the size of a real store --------------------------------------------

TICKET_DOC = "Ticket: Greeting. The greeting says hello in the user's language."


@pytest.fixture
def big_site(tmp_path) -> Iterator[Any]:
    """3,000 docs (bm25, one bulk index), one of them indexed by ticket 001-greeting."""
    from orchestrator.bench.memory_page import fill_memory

    app = create_app(make_project(tmp_path), fake=True)
    state = app.state.middle
    state.sync_folder()
    fill_memory(state.memory(), state.store, "calc", 0, 3_000)
    state.memory().index("calc", [TICKET_DOC])
    state.store.add_memory_doc("001-greeting", "calc", TICKET_DOC)
    with ServerThread(app) as thread, httpx.Client(base_url=thread.url, timeout=60) as api:
        yield Site(thread.url, api, None)


def listed(driver: Any) -> list[str]:
    return [li.get_attribute("data-id") for li in driver.find_elements(By.CSS_SELECTOR, "#docs .doc-item")]


@pytest.mark.parametrize("width", [1366, 390])
def test_one_page_of_3000_docs_next_page_and_a_search_hit_with_its_actions(browser, big_site, width):
    d = browser
    d.set_window_size(width, 900)
    try:
        d.get(big_site.url + "/projects/calc/memory")
        first = listed(d)
        assert len(first) == 20 and d.find_element(By.ID, "matched").text == "3001"
        # nothing wider than the screen (a phone scrolls down, not sideways)
        assert d.execute_script("return document.documentElement.scrollWidth") <= width
        d.find_element(By.ID, "next-page").click()
        wait(d, lambda d: "cursor=" in d.current_url and listed(d) and listed(d)[0] not in first, "page 2")
        second = listed(d)
        assert len(second) == 20 and not set(second) & set(first)

        box = d.find_element(By.ID, "q")
        box.clear()
        box.send_keys("greeting hello language", Keys.ENTER)
        wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .doc-item"), "search hits")
        hit = d.find_element(By.CSS_SELECTOR, "#results .doc-item")
        assert TICKET_DOC in hit.text
        link = hit.find_element(By.CSS_SELECTOR, "a.ticket-link")
        assert link.get_attribute("href").endswith("/tickets/001-greeting")
        actions = {b.get_attribute("data-action") for b in hit.find_elements(By.CSS_SELECTOR, ".doc-actions button")}
        assert actions == {"show", "edit", "supersede", "pin", "delete"}
        hit.find_element(By.CSS_SELECTOR, '[data-action="pin"]').click()
        # the page reloads 300 ms later; the success message is still there after it
        wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .pill.pinned"), "the pin shown")
        wait(d, lambda d: "pinned" in d.find_element(By.ID, "toast").text, "the message after the reload")
        screenshot(d, "memory-3000") if width == 1366 else None  # both widths, once
    finally:
        d.set_window_size(1280, 800)


# -- issue 38: expiry on the page, forget many with one confirmation and one undo, as of a date ----

def press(driver: Any, element: Any) -> None:
    """Click an element once it is in the middle of the screen (a phone's toast covers the bottom)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


STAGING = [f"Staging note {n}: deploys to staging go through the VPN host {n}." for n in range(3)]
OLD_RULE = "Release freeze every Friday afternoon."


@pytest.mark.parametrize("width", [1366, 390])
def test_expiry_shown_filtered_and_edited_then_forget_many_and_undo_once(browser, memory_site, width):
    api, d = memory_site.api, browser
    base = "/api/projects/calc/memory"
    for text in STAGING:
        assert api.post(f"{base}/docs", json={"text": text}).status_code == 200
    old, kept = doc_id(OLD_RULE)[:8], doc_id(STAGING[0])[:8]
    d.set_window_size(width, 900)
    try:
        d.get(memory_site.url + "/projects/calc/memory")
        adding = d.find_element(By.ID, "add-doc")  # a doc added with its last valid day
        adding.find_element(By.NAME, "text").send_keys(OLD_RULE)
        d.execute_script("arguments[0].value = '2001-01-01'", adding.find_element(By.NAME, "valid_until"))
        press(d, adding.find_element(By.CSS_SELECTOR, "button[type=submit]"))
        wait(d, lambda d: item(d, old) is not None, "the added doc")
        assert "expired 2001-01-02" in item(d, old).find_element(By.CSS_SELECTOR, ".pill.validity.expired").text
        assert d.execute_script("return document.documentElement.scrollWidth") <= width
        d.get(memory_site.url + "/projects/calc/memory?expired=true")
        assert listed(d) == [old]
        d.get(memory_site.url + "/projects/calc/memory")

        found = click(d, kept, "edit")  # the last valid day, set in the edit form
        day = found.find_element(By.CSS_SELECTOR, ".edit-form input[name=valid_until]")
        d.execute_script("arguments[0].value = '2030-01-31'", day)
        press(d, found.find_element(By.CSS_SELECTOR, ".edit-form button[type=submit]"))
        wait(d, lambda d: "valid until 2030-02-01" in item(d, kept).text, "the new validity")
        day = item(d, kept).find_element(By.CSS_SELECTOR, "input[name=valid_until]")
        assert day.get_attribute("value") == "2030-01-31"  # the Edit form shows the last valid day

        picker = d.find_element(By.ID, "bulk-filter")  # forget many
        picker.find_element(By.NAME, "containing").send_keys("staging", Keys.ENTER)
        wait(d, lambda d: d.find_element(By.ID, "bulk-picked").is_displayed(), "the picked docs")
        assert d.find_element(By.ID, "bulk-count").text == "3"
        assert len(d.find_elements(By.CSS_SELECTOR, "#bulk-list .bulk-doc")) == 3
        press(d, d.find_element(By.ID, "bulk-forget"))
        confirm = d.find_element(By.ID, "bulk-confirm")
        assert confirm.is_displayed() and "Forget all 3 docs" in confirm.text and item(d, kept)  # asked first
        press(d, d.find_element(By.ID, "bulk-yes"))
        wait(d, lambda d: item(d, kept) is None and "Forgot 3 docs" in d.find_element(By.ID, "toast").text,
             "the picked docs gone")
        assert listed(d) == [old]
        change = d.find_elements(By.CSS_SELECTOR, "#changes .change-item")[0]
        press(d, change.find_element(By.CSS_SELECTOR, '[data-action="undo"]'))
        press(d, change.find_element(By.CSS_SELECTOR, '[data-action="confirm-undo"]'))
        wait(d, lambda d: len(listed(d)) == 4, "all three back with one undo")

        box = d.find_element(By.ID, "q")  # what memory said on a day before any of them
        box.send_keys("staging deploys")
        d.execute_script("document.getElementById('as-of').value = '2001-01-01'")
        box.send_keys(Keys.ENTER)
        wait(d, lambda d: d.find_elements(By.ID, "as-of-note"), "the as-of answer")
        assert "0 docs held then" in d.find_element(By.ID, "as-of-note").text
        assert not d.find_elements(By.CSS_SELECTOR, "#results .doc-item")
        screenshot(d, "memory-bulk-expiry") if width == 1366 else None
    finally:
        d.set_window_size(1280, 800)
