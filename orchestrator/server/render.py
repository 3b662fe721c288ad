"""The dashboard's Jinja2 templates (autoescaped) and the filters they use: links, Markdown, money, times."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from orchestrator.server.links import LINK_ATTRS, bare_urls

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
STATIC_DIR = Path(__file__).resolve().parent / "static"

def linkify(text: Any) -> Markup:
    """Escape text, then turn each http(s) URL in it into a link (nothing else becomes markup)."""
    if text is None:
        return Markup("")
    text = str(text)
    attrs = Markup("").join(Markup(' {}="{}"').format(k, v) for k, v in LINK_ATTRS.items())
    out, pos = [], 0
    for start, end in bare_urls(text):
        out.append(escape(text[pos:start]))
        out.append(Markup('<a href="{0}"{1}>{0}</a>').format(text[start:end], attrs))
        pos = end
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def diff_html(patch: str) -> Markup:
    """One file's unified diff, syntax-coloured by pygments (which escapes every character)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    return Markup(highlight(patch or "", DiffLexer(), HtmlFormatter(nowrap=True)))


def money(value: Any) -> str:
    return f"${float(value or 0):.4f}"


def when(value: str | None) -> str:
    """A stored UTC timestamp as a short relative time ("3 min ago"); '' when none."""
    if not value:
        return ""
    try:
        then = datetime.fromisoformat(value)
    except ValueError:
        return value
    secs = max(0, int((datetime.now(timezone.utc) - then).total_seconds()))
    if secs < 60:
        return f"{secs}s ago"
    if secs < 3600:
        return f"{secs // 60} min ago"
    if secs < 86400:
        return f"{secs // 3600} h ago"
    return then.strftime("%Y-%m-%d %H:%M UTC")


def clock(value: str | None) -> str:
    """The time of day of a stored UTC timestamp (HH:MM:SS), for event lines."""
    return value[11:19] if value and len(value) >= 19 else (value or "")


def size(n: int | None) -> str:
    n = int(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) if value is not None else ""


def markdown(text: str | None) -> Markup:
    """A ticket description rendered from Markdown, safely (see orchestrator/server/markdown.py)."""
    from orchestrator.server.markdown import render_markdown

    return render_markdown(text)


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))  # autoescape on for .html
    env = templates.env
    env.autoescape = True  # every template, whatever its extension: stored text is untrusted
    env.filters.update(linkify=linkify, markdown=markdown, diff_html=diff_html, money=money, when=when,
                       clock=clock, size=size, pretty=pretty)
    return templates
