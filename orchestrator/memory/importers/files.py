"""Notes and sessions as memory: Markdown or text files (one doc per section, split at headings)
and Claude Code session transcripts (`~/.claude/projects/<dir>/*.jsonl`, one doc per session)."""

from __future__ import annotations

import json
import re
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.errors import MiddleError
from orchestrator.memory.importers import Record

TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".rst", ".adoc")
TRANSCRIPT_SUFFIX = ".jsonl"
MAX_TURN_CHARS = 600  # of each assistant answer in a session's doc: the user's prompts matter most
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
# What Claude Code writes into the user's turn itself (slash commands, reminders, hook output).
_MARKUP = re.compile(r"^<(command-|local-command|system-reminder|user-prompt-submit-hook)", re.I)


class ImportInputError(MiddleError):
    """A file given to `middle memory import` cannot be read as notes or a transcript."""


# The kernel's and the devices' files: never notes, and some hold secrets (/proc/self/environ
# is the process's environment) or never end (/dev/zero).
SYSTEM_DIRS = (Path("/proc"), Path("/sys"), Path("/dev"))
_WHAT = "give Markdown or text files, Claude Code transcripts (.jsonl), or folders of them"


def _refuse_system(path: Path) -> None:
    resolved = path.resolve()
    place = next((d for d in SYSTEM_DIRS if resolved.is_relative_to(d)), None)
    if place is not None:
        raise ImportInputError(f"{path} is under {place}, a file of the system, not notes: nothing "
                               f"was imported; {_WHAT}")


def _regular(path: Path) -> bool:
    """Whether `path` (followed through links) is a regular file: not a device, pipe or socket,
    which could block the import or never end."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def expand(paths: list[Path]) -> list[Path]:
    """The files to import: each file given, and the importable files in each directory given.
    Regular files only, and none of the system's (/proc, /sys, /dev)."""
    files: list[Path] = []
    for path in paths:
        if path.exists() and not path.is_dir() and not _regular(path):
            raise ImportInputError(f"{path} is not a regular file (a device, a pipe or a socket): "
                                   f"{_WHAT}")
        if path.exists():
            _refuse_system(path)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if _regular(p)
                           and p.suffix.lower() in (*TEXT_SUFFIXES, TRANSCRIPT_SUFFIX))
            if not found:
                raise ImportInputError(f"{path} holds no Markdown, text or .jsonl transcript files "
                                       "to import")
            files += found
        elif path.exists():
            files.append(path)
        else:
            raise ImportInputError(f"{path} does not exist: {_WHAT}")
    return list(dict.fromkeys(files))


def read_records(path: Path) -> list[Record]:
    """The docs of one file, with their times; a clear error for what cannot be imported."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ImportInputError(f"{path} is not UTF-8 text: import Markdown or text files, or "
                               "Claude Code's .jsonl transcripts") from None
    except OSError as exc:
        raise ImportInputError(f"cannot read {path} ({exc.strerror})") from None
    if path.suffix.lower() == TRANSCRIPT_SUFFIX:
        return [transcript_record(path, text)]
    when = path.stat().st_mtime
    return [(doc, when) for doc in sections(path.name, text)]


def sections(name: str, text: str) -> list[str]:
    """One doc per section: its heading trail (e.g. "notes.md > Decisions > Caching") and text.
    Headings inside code blocks are text; a file without headings is one section."""
    docs: list[str] = []
    trail: list[tuple[int, str]] = []
    body: list[str] = []
    in_code = False

    def flush() -> None:
        content = "\n".join(body).strip()
        if content:
            docs.append(" > ".join([name, *(t for _, t in trail)]) + "\n" + content)
        body.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        match = None if in_code else _HEADING.match(line)
        if match:
            flush()
            level = len(match.group(1))
            trail = [(lvl, t) for lvl, t in trail if lvl < level] + [(level, match.group(2).strip())]
        else:
            body.append(line)
    flush()
    return docs


def transcript_record(path: Path, text: str) -> Record:
    """A Claude Code session as one doc: the user's prompts and the assistant's text, dated by
    its first message."""
    lines: list[str] = []
    first: float | None = None
    session = path.stem
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            entry: Any = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ImportInputError(f"{path} line {number} is not JSON ({exc.msg}): a Claude Code "
                                   "transcript has one JSON object per line") from None
        if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
            continue
        if entry.get("isMeta") or entry.get("isSidechain"):
            continue
        said = _text(entry.get("message"))
        if not said:
            continue
        if first is None:
            first = _time(entry.get("timestamp"))
            session = str(entry.get("sessionId") or session)
        if entry["type"] == "user":
            lines.append(f"User: {said}")
        else:
            lines.append("Assistant: " + (said if len(said) <= MAX_TURN_CHARS
                                          else said[:MAX_TURN_CHARS].rstrip() + " …"))
    if not lines:
        raise ImportInputError(f"{path} holds no user or assistant messages: is it a Claude Code "
                               "session transcript (~/.claude/projects/<dir>/<session>.jsonl)?")
    day = f" ({datetime.fromtimestamp(first, timezone.utc).date().isoformat()})" if first is not None else ""
    return f"Claude Code session {session}{day}:\n" + "\n".join(lines), first


def _text(message: Any) -> str:
    """The plain text of a message: its string content, or its text blocks (tool calls, tool
    results and thinking left out)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    else:
        return ""
    kept = [p.strip() for p in parts if isinstance(p, str) and p.strip() and not _MARKUP.match(p.strip())]
    return "\n".join(kept)


def _time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
