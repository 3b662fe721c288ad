"""The turn-retaining lifecycle through observe_round, and the mental models in agent_context."""

from __future__ import annotations

from backends.hindsight.lifecycle import conversation_tag


def test_observe_round_is_off_by_default(open_bank):
    hb = open_bank()
    hb.observe_round("run-1", "Fix the parser.", "Fixed it in parser.py.")
    assert hb.list_docs() == []


def test_every_n_turns_with_overlap_tagged_and_memory_stripped(open_bank):
    hb = open_bank(retain_every_turns=2, retain_overlap_turns=1, mental_models={})
    hb.observe_round("run-7", "Memories invoked:\nTicket: old. secret recall.\n\nAdd a retry to "
                     "the webhook client.", "Added a retry with backoff in webhook_client.py.")
    assert hb.list_docs() == []
    hb.observe_round("run-7", "Now run the tests.", "All 42 tests pass.")
    (doc,) = hb.list_docs()
    assert "[turn 1]" in doc and "[turn 2]" in doc and "secret recall" not in doc
    hb.observe_round("run-8", "Other ticket: bump the version.", "Bumped to 2.0.")
    hb.observe_round("run-7", "Update the changelog.", "Changelog updated.")
    hb.observe_round("run-7", "Commit it.", "Committed as abc123.")
    window = hb.list_docs()[-1]
    assert "[turn 2]" in window and "[turn 4]" in window and "[turn 1]" not in window
    scoped = hb.recall_query("webhook retry tests changelog", 10, tags=[conversation_tag("run-7")]).hits
    assert scoped and all("run-8" not in h.text and "version" not in h.text for h in scoped)
    # The middle agent's recall shows a window's best fact, not the whole window.
    (result,) = hb.retrieve(["webhook retry backoff"], 1)
    assert "webhook_client.py" in result["docs"][0] and "[turn 2]" not in result["docs"][0]


def test_agent_context_is_compact_with_a_clear_header(open_bank):
    hb = open_bank(agent_context_chars=600)
    assert hb.agent_context() == ""
    hb.index([f"Ticket: Style {i}. Convention: we use tabs and type hints in module_{i}." for i in range(30)])
    context = hb.agent_context()
    assert context.startswith("Project knowledge (Hindsight mental models")
    assert "### project conventions (v" in context and len(context) <= 600
    assert "[" not in context.split("\n", 1)[1]  # fact ids are for the CLI, not the agent
    items = [line for line in context.splitlines() if line.startswith("- ")]
    assert items and len(items) == len(set(items))  # a fact both models hold is shown once


def test_a_round_given_again_is_kept_once_even_after_its_retain(open_bank, tmp_path):
    # A run killed between giving a round and recording it (kill point memory.observed) gives it
    # again on takeover: equal to the conversation's last round, it is taken as given already,
    # also when the retain it made has removed it from the pending rounds (overlap 0).
    hb = open_bank(retain_every_turns=1, retain_overlap_turns=0, mental_models={})
    hb.observe_round("run-3", "Add a.txt.", "Wrote a.txt.")
    hb.observe_round("run-3", "Add a.txt.", "Wrote a.txt.")
    assert len(hb.list_docs()) == 1
    hb.observe_round("run-3", "Add b.txt.", "Wrote b.txt.")
    hb.observe_round("run-4", "Add b.txt.", "Wrote b.txt.")  # another conversation's round is its own
    assert len(hb.list_docs()) == 3
    windowed = open_bank(path=tmp_path / "windowed", retain_every_turns=2, retain_overlap_turns=0,
                         mental_models={})
    windowed.observe_round("run-5", "Add a.txt.", "Wrote a.txt.")
    windowed.observe_round("run-5", "Add a.txt.", "Wrote a.txt.")
    windowed.observe_round("run-5", "Add b.txt.", "Wrote b.txt.")
    (doc,) = windowed.list_docs()
    assert doc.count("Wrote a.txt.") == 1 and "[turn 2]" in doc and "[turn 3]" not in doc
