"""Chat Completions <-> Messages API translation with tools, for the fake Chat Completions API.

The responders (ScriptedResponder, DemoResponder) speak Anthropic: `system`, `messages` of text /
tool_use / tool_result blocks, and canonical tool calls with Claude Code's names (`Write
{file_path, content}`, `Edit {file_path, old_string, new_string}`, `Read {file_path}`, `Bash
{command}`). A coding agent on Chat Completions (OpenCode) offers its own tools instead (OpenCode
1.18: `write {filePath, content}`, `edit {filePath, oldString, newString}`, `read {filePath}`,
`bash {command}`), so each canonical call is renamed to the request's tool of the same name
(case-insensitive) and each argument to the tool's parameter spelled the same apart from case and
underscores, read from the `tools` the request offered. The reverse mapping puts the agent's own
calls in the history back into canonical form, so a script or the demo model reads "the turn after
Write ran" whichever CLI ran it. A call to a tool the request does not offer is sent as scripted
(the CLI then reports an unknown tool, as it would from a real model).

A `role: tool` message has no error flag in Chat Completions: a CLI sends a failed call's error
text as the content (OpenCode 1.18: its tool's message, "File not found: ...", "oldString not
found in content", a permission rule's refusal). Those texts are recognised (`tool_failed`) and the
tool_result is marked `is_error`, as the Messages API's is, so a script or the demo model can
react to a failed call whichever wire it came over.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from .replies import Reply, new_id

__all__ = ["CANONICAL_TOOLS", "as_messages_body", "completion", "stream_chunks", "to_chat_tool_calls", "tool_failed"]

# How a failed tool call's content starts (OpenCode 1.18's tools, recorded from the CLI; a thrown
# Error's own "Error: ..."): the only sign of a failure the Chat Completions wire carries.
_FAILED = re.compile(
    r"^\s*(?:Error\b|<error>|File not found: |oldString not found in content|Found multiple matches for oldString"
    r"|The user (?:has specified a rule which prevents you|rejected permission)"
    r"|The arguments provided to the tool are invalid|Model tried to call unavailable tool)")


def tool_failed(content: str) -> bool:
    """Whether a `role: tool` message's content is a failed call's error text (see the module doc)."""
    return bool(_FAILED.match(content))

# Claude Code's tool names and argument names: what scripts and the demo model write.
CANONICAL_TOOLS: dict[str, tuple[str, ...]] = {
    "Write": ("file_path", "content"),
    "Edit": ("file_path", "old_string", "new_string", "replace_all"),
    "Read": ("file_path", "offset", "limit"),
    "Bash": ("command", "timeout", "description"),
}


def _key(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _offered(tools: list[Any] | None) -> dict[str, dict[str, Any]]:
    """The request's function tools by name, each with its parameter names."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            params = params if isinstance(params, dict) else {}
            out[fn["name"]] = {"description": fn.get("description") or "", "parameters": params,
                               "names": list((params.get("properties") or {}).keys())}
    return out


def _rename(args: dict[str, Any], names: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`args` with each key replaced by the name in `names` it matches apart from case and underscores."""
    by_key = {_key(n): n for n in names}
    return {by_key.get(_key(k), k): v for k, v in args.items()}


def to_agent_call(name: str, args: dict[str, Any], tools: list[Any] | None) -> tuple[str, dict[str, Any]]:
    """A canonical call (e.g. Write {file_path}) as the agent's own (write {filePath})."""
    offered = _offered(tools)
    match = next((n for n in offered if n.lower() == name.lower()), None)
    if match is None:
        return name, dict(args)
    return match, _rename(args, offered[match]["names"])


def to_canonical_call(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The agent's call (write {filePath}) as the canonical one (Write {file_path}); others unchanged."""
    canonical = next((c for c in CANONICAL_TOOLS if c.lower() == name.lower()), None)
    if canonical is None:
        return name, dict(args)
    return canonical, _rename(args, CANONICAL_TOOLS[canonical])


def _text(content: Any) -> str:
    """A chat message's content as text (a string, or a list of {type: text} parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_raw_arguments": raw}


def as_messages_body(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions body as a Messages API body, for the responders.

    System messages join into `system`; an assistant message's `tool_calls` become canonical
    tool_use blocks and the `role: tool` messages after it one user message of tool_result blocks
    (paired by id); the chat's `tools` become Messages API tools (so `classify` sees a coding agent).
    Text-only chats give string contents, as before tools were supported."""
    system = "\n".join(_text(m.get("content")) for m in chat.get("messages") or [] if m.get("role") == "system")
    messages: list[dict[str, Any]] = []
    for m in chat.get("messages") or []:
        role = m.get("role")
        if role == "user":
            messages.append({"role": "user", "content": _text(m.get("content"))})
        elif role == "assistant":
            calls = [c for c in m.get("tool_calls") or [] if isinstance(c, dict)]
            if not calls:
                messages.append({"role": "assistant", "content": _text(m.get("content"))})
                continue
            blocks: list[dict[str, Any]] = []
            if _text(m.get("content")):
                blocks.append({"type": "text", "text": _text(m.get("content"))})
            for call in calls:
                fn = call.get("function") or {}
                name, args = to_canonical_call(str(fn.get("name") or ""), _arguments(fn.get("arguments")))
                blocks.append({"type": "tool_use", "id": call.get("id"), "name": name, "input": args})
            messages.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                                      "content": _text(m.get("content"))}
            if tool_failed(result["content"]):
                result["is_error"] = True  # as the Messages API flags it (see the module doc)
            last = messages[-1] if messages else None
            if last and last["role"] == "user" and isinstance(last["content"], list):
                last["content"].append(result)  # several results of one step: one user message
            else:
                messages.append({"role": "user", "content": [result]})
    body: dict[str, Any] = {"model": chat.get("model"), "system": system, "messages": messages,
                            "max_tokens": chat.get("max_tokens")}
    offered = _offered(chat.get("tools"))
    if offered:
        body["tools"] = [{"name": n, "description": t["description"], "input_schema": t["parameters"]}
                         for n, t in offered.items()]
    return body


def to_chat_tool_calls(reply: Reply, tools: list[Any] | None) -> list[dict[str, Any]]:
    """The reply's tool_use blocks as Chat Completions `tool_calls`, in the agent's own names."""
    calls = []
    for block in reply.content:
        if block.get("type") != "tool_use":
            continue
        name, args = to_agent_call(str(block.get("name")), dict(block.get("input") or {}), tools)
        calls.append({"id": block.get("id") or new_id("call_"), "type": "function",
                      "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
    return calls


def reply_text(reply: Reply) -> str:
    return "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")


def completion(reply: Reply, model: str, tools: list[Any] | None, usage: dict[str, int]) -> dict[str, Any]:
    """The non-streaming `chat.completion` object for a reply."""
    calls = to_chat_tool_calls(reply, tools)
    message: dict[str, Any] = {"role": "assistant", "content": reply_text(reply) or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage}


def stream_chunks(reply: Reply, model: str, tools: list[Any] | None, usage: dict[str, int] | None
                  ) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects that stream a reply, as OpenAI sends them: the role and
    text, each tool call's id and name then its arguments in two pieces (so a client must really
    assemble them), the finish reason, and the usage chunk (empty choices) when `usage` is given."""
    ident, created = new_id("chatcmpl-"), int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text = reply_text(reply)
    chunks = [chunk({"role": "assistant", "content": ""})]
    if text:
        chunks.append(chunk({"content": text}))
    calls = to_chat_tool_calls(reply, tools)
    for i, call in enumerate(calls):
        fn = call["function"]
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": fn["name"], "arguments": ""}}]}))
        half = len(fn["arguments"]) // 2
        for part in (fn["arguments"][:half], fn["arguments"][half:]):
            chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    if usage is not None:
        chunks.append({"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": usage})
    return chunks
