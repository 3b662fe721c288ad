"""DemoResponder: a deterministic offline "model" that plans, creates files via Write, and decides."""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from orchestrator.agent.notes import read_notes
from orchestrator.agent.prompts import (
    ASSESS_INSTRUCTIONS,
    CHANGED,
    CHECK_FAILED,
    CONVERSATION,
    DESCRIPTION,
    NOT_RUN_YET,
    RESPONDED,
    REVIEW,
    SENT,
)
from orchestrator.memory.explain import matched_keywords

from .messages import content_text, last_message, last_user_text, working_directory
from .replies import ApiError, Reply, reply, text, tool_use

# ``Create `path/file.ext` with:`` then a fenced block; the closing fence must match the opening.
_CREATE_RE = re.compile(
    r"Create\s+`(?P<path>[^`\n]+)`\s+with:[ \t]*\n(?:[ \t]*\n)*"
    r"[ \t]*(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
    re.S | re.M,
)
_DESCRIPTION_RE = re.compile(rf"^[ \t]*{re.escape(DESCRIPTION)}[ \t]*", re.M)


def file_instructions(prompt: str) -> list[tuple[str, str]]:
    """Every (relative path, content) pair the prompt asks for; content keeps its final newline."""
    return [(m.group("path").strip(), m.group("body")) for m in _CREATE_RE.finditer(prompt)]


def plan_instruction(user_text: str) -> str:
    """The ticket text after the `Description:` line (or the whole message), minus our marker line."""
    matches = list(_DESCRIPTION_RE.finditer(user_text))
    instruction = user_text[matches[0].end():] if matches else user_text
    lines = [line for line in instruction.splitlines() if line.strip() != NOT_RUN_YET]
    return "\n".join(lines).strip()


def latest_response(user_text: str) -> str | None:
    """Claude Code's latest response: everything after the last `Claude Code responded:` line."""
    index = user_text.rfind(RESPONDED)
    if index < 0:
        return None
    return user_text[index + len(RESPONDED):].strip()


def one_sentence(response: str, limit: int = 200) -> str:
    """The first sentence of the first non-empty line, shortened to `limit` characters."""
    line = next((ln.strip() for ln in response.splitlines() if ln.strip()), "")
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0] if line else "no output"
    if len(sentence) > limit:
        sentence = sentence[: limit - 3].rstrip() + "..."
    return sentence if sentence.endswith((".", "!", "?", "...")) else sentence + "."


def latest_prompt(user_text: str) -> str | None:
    """The prompt the middle agent last sent Claude Code (between the last two markers)."""
    start = user_text.rfind(SENT)
    if start < 0:
        return None
    end = user_text.find(RESPONDED, start)
    return user_text[start + len(SENT): end if end > 0 else None].strip()


def assess_description(user_text: str) -> str:
    """The ticket's description in an assess request: between `Description:` and the conversation."""
    matches = list(_DESCRIPTION_RE.finditer(user_text))
    if not matches:
        return ""
    rest = user_text[matches[0].end():]
    end = rest.find("\n\n" + CONVERSATION)
    return (rest[:end] if end >= 0 else rest).strip()


# A memory as the "Memories invoked" block shows it: `[id] text`, or `- DATE [id] text` as recent work.
_MEMORY_RE = re.compile(r"^(?:- \d{4}-\d{2}-\d{2} )?\[([0-9a-f]{8})\] (.+)$", re.M)
_TICKET_RE = re.compile(r"^Ticket: (.*)$", re.M)
MIN_SHARED = 2  # words a memory and the ticket share before the demo model says it used it


def memories_used(user_text: str) -> list[dict[str, str]]:
    """The memories of the block whose words the demo model finds in its ticket (its title and
    description), each with the words it shares: how `memories_used` is tested offline."""
    ticket_at = user_text.find("\n\nTicket: ")
    if ticket_at < 0:
        return []
    block, body = user_text[:ticket_at], user_text[ticket_at:]
    title = _TICKET_RE.search(body)
    ticket = f"{title.group(1) if title else ''} {assess_description(body)}"
    used: list[dict[str, str]] = []
    for ident, memory in _MEMORY_RE.findall(block):
        shared = [w for w in matched_keywords(ticket, memory) if len(w) >= 4]
        if len(shared) >= MIN_SHARED and all(u["id"] != ident for u in used):
            used.append({"id": ident, "why": f"it names {', '.join(shared[:3])}, as this ticket does"})
    return used


def responses(user_text: str) -> str:
    """Every Claude Code response of the conversation, joined (without the instructions after it)."""
    ends = [i for i in (user_text.find("\n\n" + CHANGED), user_text.find("\n\n" + ASSESS_INSTRUCTIONS))
            if i >= 0]
    parts = user_text[:min(ends, default=len(user_text))].split(RESPONDED)[1:]
    return "\n".join(p.split(SENT)[0].split("\n--- Turn")[0] for p in parts)


def assess(prompt: str, response: str, description: str = "", said: str = "") -> dict[str, Any]:
    """Complete only when Claude Code reported creating every file the prompt asked for.

    The demo model can do nothing else, so any other ticket fails honestly, saying why, and no
    summary is indexed for it (nothing was done). A completion also lists the decisions,
    rejected alternatives and instructions worded as such in the ticket (`description`) and in
    what Claude Code said (`said`).
    """
    wanted = [path for path, _ in file_instructions(prompt)]
    created = [p for p in wanted if f"Created {posixpath.normpath(p)}." in response]
    if wanted and created == wanted:
        return {"complete": True, "summary": f"Created {', '.join(wanted)} as the ticket asked.",
                "next_prompt": "", **read_notes(description, said or response)}
    if wanted:
        missing = ", ".join(p for p in wanted if p not in created)
        why = f"Claude Code did not create {missing} ({one_sentence(response)})"
    else:
        why = ("the offline demo model can only create files asked for as ``Create `path` with:`` "
               "and a fenced code block, and this ticket asks for none")
    return {"complete": False, "summary": f"Not done: {why}", "next_prompt": ""}


class DemoResponder:
    """The built-in fake model for `middle demo` and offline runs; needs no script."""

    def respond(self, channel: str, body: dict[str, Any]) -> Reply | ApiError:
        if channel == "agent":
            return self._agent(body)
        if channel == "coding_agent":
            return self._coding_agent(body)
        return reply(text("Offline demo."))

    def _agent(self, body: dict[str, Any]) -> Reply:
        user_text = last_user_text(body)
        response = latest_response(user_text)
        if response is None and REVIEW in user_text:  # a review round: the human's words are the task
            return reply(text(json.dumps({"prompt": user_text[user_text.rfind(REVIEW) + len(REVIEW):].strip()})))
        if response is None and CHECK_FAILED in user_text:  # a failed check: its output is the task
            failure = user_text[user_text.rfind(CHECK_FAILED) + len(CHECK_FAILED):].strip()
            return reply(text(json.dumps({"prompt": "The project's check failed; fix it.\n" + failure})))
        if response is None:  # the planning request: turn the ticket into Claude Code's prompt
            return reply(text(json.dumps({"prompt": plan_instruction(user_text)})))
        decision = assess(latest_prompt(user_text) or "", response, assess_description(user_text),
                          responses(user_text))
        used = memories_used(user_text)
        return reply(text(json.dumps({**decision, "memories_used": used} if used else decision)))

    def _coding_agent(self, body: dict[str, Any]) -> Reply:
        cwd = working_directory(body)
        results = _tool_results(body)
        if results is not None:
            return reply(text(" ".join(_describe_result(r, cwd) for r in results)))
        prompt = last_user_text(body)
        wanted = file_instructions(prompt)
        if not wanted:
            first = next((ln.strip() for ln in prompt.splitlines()
                          if ln.strip() and not ln.lstrip().startswith("<")), "the task")
            return reply(text(f"I would work on this: {first[:200]} (the offline demo model only "
                              "creates files asked for as: Create `path` with: and a fenced code block)."))
        if cwd is None:
            return reply(text("I cannot tell the working directory from Claude Code's request, "
                              "so the offline demo model cannot create files."))
        blocks = [text(f"Creating {', '.join(p for p, _ in wanted)}.")]
        blocks += [tool_use("Write", {"file_path": posixpath.normpath(posixpath.join(cwd, path)),
                                      "content": content}) for path, content in wanted]
        return reply(*blocks)


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tool results in the latest user message joined with their tool_use, or None if none."""
    user = last_message(body, "user")
    if not user or isinstance(user.get("content"), str):
        return None
    results = [b for b in user["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    if not results:
        return None
    assistant = last_message(body, "assistant") or {}
    uses = {b.get("id"): b for b in assistant.get("content") or [] if isinstance(b, dict)}
    return [dict(r, tool_use=uses.get(r.get("tool_use_id"), {})) for r in results]


def _describe_result(result: dict[str, Any], cwd: str | None) -> str:
    use = result["tool_use"]
    path = (use.get("input") or {}).get("file_path", "the file")
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        path = path[len(cwd.rstrip("/")) + 1:]
    if use.get("name") != "Write":
        return f"Ran {use.get('name', 'a tool')}."
    if result.get("is_error"):
        return f"Could not create {path}: {content_text(result.get('content'))[:200]}"
    return f"Created {path}."
