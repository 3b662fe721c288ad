"""The offline demo model: planning, deciding, and turning "Create `path` with:" into Write calls."""

from __future__ import annotations

import json

from orchestrator.fake_api import MIDDLE_AGENT_MARKER, DemoResponder, working_directory
from orchestrator.fake_api.demo import file_instructions, one_sentence, plan_instruction

PROMPT = """Please do this.

Create `src/app.py` with:

```python
def main():
    return 1
```

Create `README.md` with:
~~~
# Title
~~~
"""

# What Claude Code 2.1.330 sends (trimmed): the cwd lives in a role "system" message.
CWD_MESSAGE = {"role": "system", "content": "# Environment\nYou have been invoked in the following environment: \n"
                                            " - Primary working directory: /work/proj\n - Is a git repository: false\n"}


def worker_body(*messages):
    return {"model": "m", "system": [{"type": "text", "text": "You are Claude Code."}], "tools": [{"name": "Write"}],
            "messages": list(messages)}


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def agent_body(user_text):
    return {"system": MIDDLE_AGENT_MARKER + ".", "messages": [{"role": "user", "content": user_text}]}


def test_file_instructions_parse_fenced_blocks():
    assert file_instructions(PROMPT) == [("src/app.py", "def main():\n    return 1\n"), ("README.md", "# Title\n")]
    assert file_instructions("Create `x.py` please") == []


def test_plan_instruction_takes_the_description():
    msg = "Ticket: Add app\nDescription:\nBuild the app.\nCreate `a.py` with:\n\nClaude Code has not been run yet.\n"
    assert plan_instruction(msg) == "Build the app.\nCreate `a.py` with:"
    assert plan_instruction("  just do it  ") == "just do it"


def test_one_sentence():
    assert one_sentence("\nCreated a.py. Then more.\nsecond line") == "Created a.py."
    assert one_sentence("no full stop") == "no full stop."
    assert one_sentence("x" * 500).endswith("...") and len(one_sentence("x" * 500)) == 200


def _assess_body(prompt: str, response: str) -> dict:
    from orchestrator.agent.prompts import transcript

    return agent_body("Title: T\nDescription: Make it.\n\nConversation so far:\n"
                      + transcript([{"turn": 1, "prompt": prompt, "response": response}]))


def test_agent_plans_then_decides():
    demo = DemoResponder()
    plan = demo.respond("agent", agent_body("Memories invoked:\nold\n\nTitle: T\nDescription: Make it.\n"
                                            "Claude Code has not been run yet."))
    assert json.loads(plan.content[0]["text"]) == {"prompt": "Make it."}
    decision = demo.respond("agent", _assess_body("Create `src/app.py` with:\n```\nx\n```\n",
                                                  "Created src/app.py. All good."))
    assert json.loads(decision.content[0]["text"]) == {
        "complete": True, "summary": "Created src/app.py as the ticket asked.", "next_prompt": ""}


def test_agent_fails_honestly_when_nothing_it_asked_for_was_done():
    demo = DemoResponder()
    nothing = json.loads(demo.respond("agent", _assess_body(
        "Refactor the billing module.", "I would work on this: Refactor the billing module.")).content[0]["text"])
    assert nothing["complete"] is False and nothing["next_prompt"] == ""
    assert "can only create files" in nothing["summary"]
    refused = json.loads(demo.respond("agent", _assess_body(
        "Create `a.py` with:\n```\nx\n```\nCreate `b.py` with:\n```\ny\n```\n",
        "Created a.py. Could not create b.py: permission denied")).content[0]["text"])
    assert refused["complete"] is False and "did not create b.py" in refused["summary"]
    assert "You are" not in refused["summary"]  # never quotes Claude Code's own prompt


def test_worker_writes_absolute_paths_under_the_announced_cwd():
    body = worker_body(user({"type": "text", "text": "<system-reminder>x</system-reminder>"},
                            {"type": "text", "text": PROMPT}), CWD_MESSAGE)
    assert working_directory(body) == "/work/proj"
    r = DemoResponder().respond("coding_agent", body)
    writes = [b for b in r.content if b["type"] == "tool_use"]
    assert [(w["name"], w["input"]["file_path"]) for w in writes] == [
        ("Write", "/work/proj/src/app.py"), ("Write", "/work/proj/README.md")]
    assert writes[0]["input"]["content"] == "def main():\n    return 1\n"


def test_worker_reports_tool_results():
    body = worker_body(
        user({"type": "text", "text": PROMPT}), CWD_MESSAGE,
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "/work/proj/src/app.py"}},
            {"type": "tool_use", "id": "t2", "name": "Write", "input": {"file_path": "/work/proj/README.md"}}]},
        user({"type": "tool_result", "tool_use_id": "t1", "content": "File created successfully"},
             {"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": "disk full"}))
    r = DemoResponder().respond("coding_agent", body)
    assert r.content == [{"type": "text", "text": "Created src/app.py. Could not create README.md: disk full"}]


def test_worker_without_instructions_says_what_it_would_do():
    r = DemoResponder().respond("coding_agent", worker_body(user({"type": "text", "text": "Refactor the parser."}),
                                                      CWD_MESSAGE))
    assert r.content[0]["type"] == "text" and "Refactor the parser." in r.content[0]["text"]


def test_aux_gets_short_text():
    assert DemoResponder().respond("aux", {"messages": []}).content[0]["text"]


def test_module_entry_serves_the_demo_model():
    import subprocess
    import sys

    import anthropic

    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.fake_api"], stdout=subprocess.PIPE, text=True)
    try:
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(base_url=base_url, api_key="k", max_retries=0)
        msg = client.messages.create(model="m", max_tokens=50, system=MIDDLE_AGENT_MARKER,
                                     messages=[{"role": "user", "content": "Description: Say hi.\n"
                                                                           "Claude Code has not been run yet."}])
        assert json.loads(msg.content[0].text) == {"prompt": "Say hi."}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
