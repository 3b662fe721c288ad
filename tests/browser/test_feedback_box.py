"""The ticket page's "Request changes" box in real headless Chromium: feedback typed there starts a
review round on the offline model, which the page then shows live."""

from __future__ import annotations

import httpx
import pytest
from browser_helpers import wait
from selenium.webdriver.common.by import By

pytestmark = pytest.mark.cli


def _run(site, ticket_id: str) -> None:
    run_id = site.api.post(f"/api/tickets/{ticket_id}/run").json()["run_id"]
    with site.api.stream("GET", f"/api/runs/{run_id}/stream", timeout=httpx.Timeout(180)) as stream:
        for line in stream.iter_lines():
            if line == "event: end":
                break


def test_request_changes_from_the_ticket_page(browser, site, claude_cli):
    _run(site, "001-greeting")
    d = browser
    d.get(site.url + "/tickets/001-greeting")
    d.execute_script("window.__sameDocument = true")  # gone if the page reloads
    box = d.find_element(By.ID, "feedback-text")
    box.send_keys("Create `calc/extra.py` with:\n```python\nEXTRA = 1\n```\n")
    d.find_element(By.CSS_SELECTOR, "#feedback-form button[type=submit]").click()
    wait(d, lambda d: "Round started" in d.find_element(By.ID, "toast").text, "the toast to say the round started")
    wait(d, lambda d: "Round 2: the human's feedback" in d.find_element(By.ID, "ticket-runs").text,
         "the runs to show round 2 with its feedback")
    wait(d, lambda d: d.find_element(By.ID, "ticket-status").text == "complete", "the ticket to be complete again")
    assert d.execute_script("return window.__sameDocument") is True
    assert d.find_element(By.ID, "feedback-text").get_attribute("value") == ""
    files = {f["path"] for f in site.api.get("/api/tickets/001-greeting/diff").json()["files"]}
    assert files == {"calc/greeting.py", "calc/extra.py"}


def test_refused_feedback_says_why_in_the_page(browser, site, claude_cli):
    d = browser
    d.get(site.url + "/tickets/001-greeting")  # complete (the test above)
    d.find_element(By.ID, "feedback-text").send_keys("   ")
    d.find_element(By.CSS_SELECTOR, "#feedback-form button[type=submit]").click()
    wait(d, lambda d: "is empty" in d.find_element(By.ID, "toast").text, "the toast to say the feedback is empty")


def test_the_box_goes_once_the_page_merges_the_ticket(browser, site, claude_cli):
    """Merged, a ticket takes no feedback: the box (outside the live-refreshed status) goes too."""
    d = browser
    d.get(site.url + "/tickets/001-greeting")  # complete (the tests above)
    assert d.find_element(By.ID, "feedback-form").is_displayed()
    d.find_element(By.CSS_SELECTOR, 'button[data-action="merge"]').click()
    wait(d, lambda d: d.find_element(By.ID, "ticket-status").text == "merged", "the ticket to be merged")
    wait(d, lambda d: not d.find_element(By.ID, "feedback-form").is_displayed(), "the feedback box to go")
    d.get(site.url + "/tickets/001-greeting")
    assert not d.find_element(By.ID, "feedback-form").is_displayed()


def test_an_unknown_ticket_page_is_a_page(browser, site):
    d = browser
    d.get(site.url + "/tickets/no-such-ticket")
    assert "Error 404" in d.find_element(By.TAG_NAME, "h1").text
    assert "no-such-ticket" in d.find_element(By.CSS_SELECTOR, ".error-box").text
    # a client that asks for nothing in particular (curl, a script) gets the page too; the API, JSON
    page = httpx.get(site.url + "/tickets/no-such-ticket", headers={"Accept": "*/*"}, cookies=site.api.cookies)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    api = site.api.get("/api/tickets/no-such-ticket")
    assert api.status_code == 404 and "no ticket" in api.json()["error"]
