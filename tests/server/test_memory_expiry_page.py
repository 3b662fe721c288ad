"""Expiry on the board and the docs API (issue 38): each doc's validity, expired docs marked and
filtered, the last valid day in the Edit form; a bad filter one 400 with a sentence."""

from __future__ import annotations

import html
import re

BASE = "/api/projects/calc/memory"
OLD, LATER, PLAIN = "Release freeze every Friday.", "Staging uses the VPN.", "The CSV export streams rows."


def test_expired_docs_are_marked_filtered_and_their_last_day_edited(server):
    c = server.client
    c.post(f"{BASE}/docs", json={"text": OLD, "valid_until": "2001-01-01"})
    later = c.post(f"{BASE}/docs", json={"text": LATER, "valid_until": "2999-12-31"}).json()["id"]
    c.post(f"{BASE}/docs", json={"text": PLAIN})
    expired = c.get(f"{BASE}/docs", params={"expired": "true"}).json()
    assert [(d["text"], d["expired"], d["validity"]) for d in expired["docs"]] == [
        (OLD, True, "expired 2001-01-02T00:00:00")]
    valid = c.get(f"{BASE}/docs", params={"expired": "false"}).json()["docs"]
    assert {d["text"] for d in valid} == {LATER, PLAIN}
    assert next(d for d in valid if d["text"] == LATER)["valid_through"] == "2999-12-31"

    page = c.get("/projects/calc/memory").text
    assert 'class="pill validity expired"' in page and "valid until 2999-12-31" not in page  # the instant after it
    assert 'name="valid_until" value="2999-12-31"' in page  # the Edit form's last valid day
    only = c.get("/projects/calc/memory", params={"expired": "true"}).text
    assert re.findall(r'<li class="doc-item" data-doc="([^"]*)"', only) == [OLD]

    r = c.post(f"{BASE}/docs/{later}/edit", json={"text": LATER, "valid_until": "never"})
    assert r.status_code == 200 and r.json()["change"]
    assert c.get(f"{BASE}/docs", params={"expired": "false"}).json()["count"] == 2
    assert all(d["valid_until"] is None for d in c.get(f"{BASE}/docs", params={"expired": "false"}).json()["docs"])

    bad = c.get(f"{BASE}/docs", params={"expired": "maybe"})
    assert bad.status_code == 400 and "expired must be true or false" in bad.json()["error"]
    page = c.get("/projects/calc/memory", params={"expired": "maybe"})
    assert page.status_code == 400 and "expired must be true or false" in html.unescape(page.text)
    bad = c.post(f"{BASE}/docs/{later}/edit", json={"text": LATER, "valid_until": "soonish"})
    assert bad.status_code == 400 and "is not a date" in bad.json()["error"]
