"""The LLM paths with a recording fake: extraction, consolidation, reflect, mental models; a bad
reply always leaves the bank as the offline path (or the previous state) had it."""

from __future__ import annotations

import json

from hindsight_helpers import RecordingLLM, facts_reply, ts

LONG = ("Ticket: Payments. Yesterday the Stripe webhook kept timing out because the handler "
        "did the PDF rendering inline. We moved rendering to the worker queue, and the "
        "webhook now answers in under a second. Decided: webhooks never do slow work inline.")


def state(hb) -> dict:
    with hb.bank.read() as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("documents", "facts", "entities", "links", "observation_support",
                          "observation_history", "mental_models")}


def test_llm_extraction_gives_typed_dated_linked_facts(open_bank):
    llm = RecordingLLM([facts_reply(
        {"text": "The Stripe webhook timed out because it rendered PDFs inline.", "kind": "world",
         "entities": ["Stripe", "webhook"], "occurred_start": "2023-05-07"},
        {"text": "The team moved PDF rendering to the worker queue.", "kind": "experience",
         "entities": ["worker queue"], "caused_by": [0], "caused_by_existing": [999]})])
    hb = open_bank(llm=llm, mental_models={})
    hb.retain(LONG, ts("2023-05-08"))
    system, prompt = llm.calls[0]
    assert '"kind"' in system and "JSON" in system  # the schema is in the instructions
    assert "Retain date: 8 May 2023" in prompt and "Stripe webhook" in prompt
    hits = {h.text: h for h in hb.recall_query("webhook PDF rendering", 5).hits}
    first = hits["The Stripe webhook timed out because it rendered PDFs inline."]
    assert first.kind == "world" and first.dated and first.when == "7 May 2023"
    assert hits["The team moved PDF rendering to the worker queue."].kind == "experience"
    with hb.bank.read() as conn:
        assert conn.execute("SELECT extractor FROM documents").fetchone() == ("llm",)
        assert conn.execute("SELECT COUNT(*) FROM links WHERE kind = 'causal'").fetchone() == (2,)
    hb.retain("Short note: tabs, not spaces.")  # below llm_extraction_min_chars: no call
    assert len(llm.calls) == 1


def test_a_reply_that_is_not_json_keeps_that_documents_offline_facts(open_bank, tmp_path):
    offline = open_bank(path=tmp_path / "offline", mental_models={})
    offline.retain(LONG, ts("2023-05-08"), document_id="d")
    for bad in ("Sure! Here are the facts: webhook, queue.",
                json.dumps({"facts": [{"text": "x", "kind": "opinion"}]}),  # fails the schema
                json.dumps({"facts": [{"text": "x", "kind": "world", "extra": 1}]}),
                "{\"facts\": [", RuntimeError("model down")):
        llm = RecordingLLM([(lambda s, p, bad=bad: (_ for _ in ()).throw(bad))
                            if isinstance(bad, Exception) else bad])
        hb = open_bank(llm=llm, path=tmp_path / f"bad{len(llm.calls)}{hash(str(bad))}", mental_models={})
        hb.retain(LONG, ts("2023-05-08"), document_id="d")
        assert len(llm.calls) == 1
        got = state(hb)
        want = state(offline)
        def strip(rows):  # without retained_at
            return [tuple(v for i, v in enumerate(r) if i not in (5,)) for r in rows]
        assert strip(got["documents"]) == strip(want["documents"])
        assert [r[2:4] for r in got["facts"]] == [r[2:4] for r in want["facts"]]


def test_consolidation_reply_malformed_changes_nothing_valid_merges(open_bank):
    fact = "Run the database migrations before the integration tests."
    llm = RecordingLLM(["no JSON here", json.dumps({"action": "separate"}),
                        json.dumps({"action": "merge", "text": "Migrations always run before integration tests."})])
    hb = open_bank(llm=llm, consolidate_threshold=0.9, mental_models={}, llm_extraction=False)
    hb.retain(fact, document_id="a")
    before = state(hb)
    hb.retain(fact.replace("Run", "Run all"), document_id="b")  # malformed consolidation reply
    after = state(hb)
    assert after["observation_support"] == [] and after["observation_history"] == []
    assert len(after["facts"]) == len(before["facts"]) + 1  # the fact itself is retained
    assert "Observation:\n" + fact in llm.calls[0][1]
    hb.retain(fact.replace("Run", "Please run"), document_id="c")  # 'separate'
    assert state(hb)["observation_support"] == []
    hb.retain(fact.replace("Run", "Do run"), document_id="d")  # merge
    obs = [r for r in state(hb)["facts"] if r[3] == "observation"]
    assert [r[2] for r in obs] == ["Migrations always run before integration tests."]


def test_reflect_cites_only_given_fact_ids_and_falls_back_offline(open_bank):
    llm = RecordingLLM()
    hb = open_bank(llm=llm, mental_models={}, llm_extraction=False)
    hb.index(["Ticket: Webhooks. The webhook handler must never render PDFs inline.",
              "Ticket: Queue. PDF rendering runs on the worker queue."])
    ids = [h.id for h in hb.recall_query("PDF rendering", 5).hits]
    llm.replies = [json.dumps({"answer": "Render PDFs on the worker queue, never inline.",
                               "fact_ids": [ids[0], 424242]}), "garbage"]
    result = hb.reflect("Where do we render PDFs?")
    assert result.synthesised and result.fact_ids == [ids[0]]
    assert f"[{ids[0]}]" in llm.calls[-1][1] and "Where do we render PDFs?" in llm.calls[-1][1]
    offline = hb.reflect("Where do we render PDFs?")  # malformed reply: the facts, grouped
    assert not offline.synthesised and "worker queue" in offline.answer and "- [" in offline.answer


def test_mental_models_refresh_and_a_bad_reply_keeps_the_previous_version(open_bank):
    llm = RecordingLLM()
    hb = open_bank(llm=llm, llm_extraction=False, mental_models={"pitfalls": "What went wrong?"},
                   agent_context_chars=400)
    llm.replies = [json.dumps({"answer": "Webhooks time out when they do slow work inline.",
                               "fact_ids": []})]
    hb.index(["Ticket: Webhooks. The webhook timed out when rendering PDFs inline."])
    (model,) = hb.mental_models()
    assert model["version"] == 1 and model["content"].startswith("Webhooks time out")
    assert "at most 16000 characters" in llm.calls[-1][1]
    llm.replies = ["{not json"]
    hb.index(["Ticket: Queue. Rendering moved to the worker queue."])
    (model,) = hb.mental_models()
    assert model["version"] == 1 and model["content"].startswith("Webhooks time out")
    context = hb.agent_context()
    assert context.startswith("Project knowledge (Hindsight mental models")
    assert "### pitfalls (v1)" in context and len(context) <= 400
