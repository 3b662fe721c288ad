"""A 4 MB memory query (it once held every other memory call of the project for 18 s, and 100 MB
ones grew the server to 15 GiB) is refused at once, and other memory calls answer meanwhile."""

from __future__ import annotations

import threading

from server_helpers import make_project

BASE = "/api/projects/calc/memory"


def test_a_4mb_query_is_refused_at_once_and_another_memory_call_answers_meanwhile(serve, tmp_path,
                                                                                monkeypatch):
    """A 4 MB query on `hybrid` once held every other memory call of the project for 18 s: it
    now never reaches the backend (so it cannot hold the project's lock) and is a 400."""
    from backends.hybrid.backend import HybridBackend

    make_project(tmp_path, backend="hybrid")
    with (tmp_path / "middle.toml").open("a") as toml:
        toml.write('\n[memory.options]\nembedder = "hashing"\n')
    from orchestrator.config.settings import load_config

    c = serve(load_config(tmp_path / "middle.toml", environ={})).client
    doc = "Ticket: Fix login. The session cookie expired too early."
    assert c.post(f"{BASE}/index", json={"docs": [doc]}).status_code == 200
    reached: list[int] = []  # the length of every query a backend was asked
    original = HybridBackend.retrieve

    def recording(self, queries, num_to_retrieve):
        reached.extend(len(q) for q in queries)
        return original(self, queries, num_to_retrieve)

    monkeypatch.setattr(HybridBackend, "retrieve", recording)
    answers: dict[str, object] = {}
    big = threading.Thread(target=lambda: answers.update(big=c.post(
        f"{BASE}/retrieve", json={"queries": ["session cookie " * 266_667]})))
    big.start()
    small = c.post(f"{BASE}/retrieve", json={"queries": ["session cookie"]})
    big.join(timeout=120)
    assert small.status_code == 200 and small.json()[0]["docs"] == [doc]
    refused = answers["big"]
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"].startswith(
        "a query of 4,000,005 characters is over [memory] max_query_chars (4,000)")
    assert reached == [len("session cookie")]  # the big one never reached the backend
    got = c.get(f"{BASE}/search", params={"q": "x" * 4001})
    assert got.status_code == 400 and "max_query_chars (4,000)" in got.json()["error"]
