"""The HTTP memory contract, called with nothing but the standard library, as a third party would."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def call(url: str, body: object) -> tuple[int, object]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_seed_000_memory_contract_over_plain_http(server):
    base = f"{server.url}/api/projects/shop/memory"
    doc = "Ticket: Fix checkout. Totals were off by one cent. Rounded with Decimal, not float."
    other = "Ticket: Add dark mode. The UI was too bright. Added a CSS theme switch."

    status, body = call(f"{base}/index?create=true", {"docs": [doc, other]})  # a new project, on purpose
    assert status == 200 and body["indexed"] == 2

    status, body = call(f"{base}/retrieve", {"queries": ["checkout totals rounding"], "num_to_retrieve": 5})
    assert status == 200
    assert isinstance(body, list) and len(body) == 1
    result = body[0]
    assert set(result) == {"question", "docs", "doc_scores"}
    assert result["question"] == "checkout totals rounding"
    assert result["docs"][0] == doc and len(result["docs"]) == len(result["doc_scores"])
    assert all(isinstance(s, float) for s in result["doc_scores"])

    status, body = call(f"{base}/delete", {"docs": [doc]})
    assert status == 200 and body["deleted"] == 1
    status, body = call(f"{base}/retrieve", {"queries": ["checkout totals rounding"]})
    assert doc not in body[0]["docs"]

    status, body = call(f"{server.url}/api/projects/..%2Fetc/memory/index", {"docs": ["x"]})
    assert status in (400, 404) and "error" in body
    status, body = call(f"{server.url}/api/projects/bad%20id/memory/retrieve", {"queries": ["x"]})
    assert status == 400 and body["error"].startswith("project id 'bad id'")
