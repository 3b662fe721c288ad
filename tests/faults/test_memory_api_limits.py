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


def _hybrid_server(serve, tmp_path):
    make_project(tmp_path, backend="hybrid")
    with (tmp_path / "middle.toml").open("a") as toml:
        toml.write('\n[memory.options]\nembedder = "hashing"\n')
    from orchestrator.config.settings import load_config

    return serve(load_config(tmp_path / "middle.toml", environ={}))


class _GatedEmbedder:
    """The hashing embedder, made to wait on `gate` for any doc holding "slowdoc": a slow
    embedder whose progress the test decides (no timing)."""

    def __init__(self, monkeypatch):
        from backends.retrieval.embedders.hashing import HashingEmbedder

        self.started, self.gate, self.batches = threading.Event(), threading.Event(), 0
        original = HashingEmbedder.embed_inputs

        def gated(embedder, inputs):
            if any("slowdoc" in text for text in inputs):
                self.batches += 1
                self.started.set()
                assert self.gate.wait(120), "the test never opened the gate"
            return original(embedder, inputs)

        monkeypatch.setattr(HashingEmbedder, "embed_inputs", gated)


def test_one_call_over_max_request_chars_is_a_413_naming_the_limit(serve, tmp_path):
    """20 docs of 20,000 characters (each within max_doc_chars) once held the project 51 s: the
    call as a whole is bounded, and refused before any work."""
    c = _hybrid_server(serve, tmp_path).client
    huge = c.post(f"{BASE}/index", json={"docs": [f"doc {i:02d} " + "x" * 19_993 for i in range(20)]})
    assert huge.status_code == 413, huge.text
    assert huge.json()["error"].startswith("the 20 docs of this call hold 400,000 characters")
    assert "over [memory] max_request_chars (100,000)" in huge.json()["error"]
    assert "raise max_request_chars under [memory] in middle.toml" in huge.json()["error"]
    assert c.get(f"{BASE}/docs").json()["count"] == 0  # nothing indexed
    many = c.post(f"{BASE}/retrieve", json={"queries": ["session cookie " * 250] * 30})
    assert many.status_code == 413 and "max_request_chars (100,000)" in many.json()["error"]


def test_a_large_index_call_embeds_outside_the_lock_so_a_small_search_answers_meanwhile(
        serve, tmp_path, monkeypatch):
    served = _hybrid_server(serve, tmp_path)
    c = served.client
    doc = "Ticket: Fix login. The session cookie expired too early."
    assert c.post(f"{BASE}/index", json={"docs": [doc]}).status_code == 200
    embedder = _GatedEmbedder(monkeypatch)
    big_docs = [f"slowdoc {i} " + "word " * 3_000 for i in range(3)]  # 45,000 characters: allowed
    answers: dict[str, object] = {}
    big = threading.Thread(target=lambda: answers.update(big=c.post(f"{BASE}/index", json={"docs": big_docs})))
    big.start()
    assert embedder.started.wait(60)  # the big call is embedding, and stays so until the gate opens
    small = c.get(f"{BASE}/search", params={"q": "session cookie"})
    assert small.status_code == 200 and [h["doc"] for h in small.json()["results"]] == [doc]
    assert "big" not in answers and big.is_alive()  # answered while the big call still embedded
    embedder.gate.set()
    big.join(timeout=120)
    assert answers["big"].status_code == 200, answers["big"].text
    assert c.get(f"{BASE}/docs").json()["count"] == 4


def test_an_index_call_whose_client_went_away_is_dropped_between_batches(serve, tmp_path, monkeypatch):
    """400 docs with the client gone after 3 s kept the server busy 22 minutes: the work stops
    at the next batch once the client has closed its connection."""
    import json
    import socket
    from urllib.parse import urlsplit

    served = _hybrid_server(serve, tmp_path)
    c = served.client
    assert c.get(f"{BASE}/stats").status_code == 200  # the test's own connection is open
    connections = served.thread.server.server_state.connections
    before = len(connections)
    embedder = _GatedEmbedder(monkeypatch)
    from orchestrator.memory.facade import MemoryFacade

    ended, outcome, original = threading.Event(), [], MemoryFacade._embed_ahead

    def watched(self, *args):  # the real embedding ahead, and how it ended
        try:
            return original(self, *args)
        except BaseException as exc:
            outcome.append(exc)
            raise
        finally:
            ended.set()

    monkeypatch.setattr(MemoryFacade, "_embed_ahead", watched)
    body = json.dumps({"docs": [f"slowdoc {i} " + "word " * 3_000 for i in range(3)]}).encode()  # a batch each
    where = urlsplit(served.url)
    client = socket.create_connection((where.hostname, where.port))
    client.sendall(f"POST {BASE}/index HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Type: "
                   f"application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    assert embedder.started.wait(60)
    client.close()  # the client goes away while its first batch embeds
    for _ in range(6000):  # until the server has seen the connection close (no timing asserted)
        if len(connections) <= before:
            break
        threading.Event().wait(0.01)
    assert len(connections) <= before
    embedder.gate.set()
    assert ended.wait(120)
    assert [type(e).__name__ for e in outcome] == ["RequestGone"]
    assert embedder.batches == 1  # the second batch was never embedded
    assert c.get(f"{BASE}/docs").json()["count"] == 0  # and nothing was stored
