"""Reading aider 0.86.2's output without aider: its stdout lines as events, tokens and cost (the forms
a real API gives: counts in thousands, cache counts with the cost on its own line), an API error,
and the replies in its LLM history file."""

from __future__ import annotations

from pathlib import Path

from orchestrator.coding_agent.aider_output import AiderOutput, replies_since

BANNER = ["", "Aider v0.86.2", "Main model: openai/x with whole edit format", "Git repo: .git with 3 files",
          "Repo-map: using 4096 tokens, auto refresh", "Restored previous conversation history.", ""]


def feed(lines: list[str], cwd: Path = Path("/p")) -> tuple[AiderOutput, list[dict]]:
    out = AiderOutput(cwd=cwd)
    events = [e for line in lines for e in out.feed(line.encode() + b"\n")]
    return out, events + out.finish()


def test_a_turn_with_an_edit_and_a_retry():
    out, events = feed([*BANNER, "I will add it.", "", "", "", "calc/a.py", "", "```", "A = 1", "", "```",
                        "Tokens: 1.2k sent, 15 received. Cost: $0.0030 message, $0.0030 session.", "calc/a.py",
                        "Applied edit to calc/a.py", "Second reply.", "",
                        "Tokens: 12k sent, 2.5k cache write, 9.0k cache hit, 40 received.",
                        "Cost: $0.01 message, $0.02 session."])
    assert [e["type"] for e in events] == ["log"] * 5 + ["text", "log", "log", "tool_use", "log", "log", "log"]
    assert events[5]["text"] == "I will add it.\n\ncalc/a.py\n\n```\nA = 1\n\n```"
    assert events[8] == {"type": "tool_use", "name": "Edit", "id": "aider-edit-1",
                         "input": {"file_path": "/p/calc/a.py"}}
    assert out.usage == {"input_tokens": 13200, "output_tokens": 55, "cache_creation_input_tokens": 2500,
                         "cache_read_input_tokens": 9000}
    assert round(out.cost_usd, 4) == 0.013 and out.exchanges == 2 and out.applied == ["calc/a.py"]


def test_an_api_error_and_a_refused_edit():
    out, _ = feed([*BANNER, "litellm.AuthenticationError: AuthenticationError: OpenAIException - bad key"])
    assert out.api_error == ("AuthenticationError", "AuthenticationError: OpenAIException - bad key")
    out, _ = feed([*BANNER, "x", "Tokens: 9 sent, 1 received.",
                   "middle refused the edit to ../x.txt: it is outside the project (/p); nothing written."])
    assert out.refused == ["../x.txt"] and out.cost_usd == 0 and out.api_error is None


def test_the_replies_of_this_turn_come_from_the_llm_history(tmp_path):
    log = tmp_path / "llm.log"
    log.write_text("TO LLM 2026-01-01T00:00:00\n-------\nUSER old\nLLM RESPONSE 2026-01-01T00:00:01\nASSISTANT old\n")
    offset = log.stat().st_size
    with log.open("a") as f:
        f.write("TO LLM 2026-01-01T00:00:02\n-------\nSYSTEM s\n-------\nASSISTANT earlier turn\n-------\nUSER q\n"
                "LLM RESPONSE 2026-01-01T00:00:03\nASSISTANT line one\nASSISTANT \nASSISTANT ```\n"
                "TO LLM 2026-01-01T00:00:04\n-------\nUSER error\nLLM RESPONSE 2026-01-01T00:00:05\n"
                "ASSISTANT fixed\n")
    assert replies_since(log, offset) == ["line one\n\n```", "fixed"]
    assert replies_since(tmp_path / "missing.log", 0) == []


def test_an_error_aider_retried_and_then_got_an_answer_for_is_no_error():
    out, _ = feed([*BANNER, "litellm.InternalServerError: InternalServerError: OpenAIException - down",
                   "The API provider's servers are down or overloaded.", "Retrying in 0.2 seconds...",
                   "Hello.", "Tokens: 9 sent, 1 received."])
    assert out.api_error is None and out.exchanges == 1
