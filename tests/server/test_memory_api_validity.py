"""The memory API's `valid_until` (issue 38): set on add and edit, an expired doc out of recall,
shown as expired; a bad date a 400 naming the field, nothing changed."""

from __future__ import annotations

BASE = "/api/projects/calc/memory"


def test_valid_until_through_the_api(server):
    c = server.client
    r = c.post(f"{BASE}/docs", json={"text": "Staging deploys go through the VPN.",
                                     "valid_until": "2020-01-31"})
    assert r.status_code == 200, r.text
    ident = r.json()["id"]
    c.post(f"{BASE}/docs", json={"text": "Staging deploys run nightly."})
    found = c.get(f"{BASE}/search", params={"q": "staging deploys", "k": 5}).json()
    assert [x["doc"] for x in found["results"]] == ["Staging deploys run nightly."]
    shown = c.get(f"{BASE}/docs/{ident}").json()
    assert shown["validity"] == "expired 2020-02-01T00:00:00"

    bad = c.post(f"{BASE}/docs/{ident}/edit", json={"text": shown["doc"], "valid_until": "soon"})
    assert bad.status_code == 400 and "valid_until 'soon' is not a date" in bad.json()["error"]
    renewed = c.post(f"{BASE}/docs/{ident}/edit", json={"text": shown["doc"], "valid_until": "never"})
    assert renewed.status_code == 200 and renewed.json()["message"] == "valid with no end"
    found = c.get(f"{BASE}/search", params={"q": "staging deploys", "k": 5}).json()
    assert len(found["results"]) == 2
