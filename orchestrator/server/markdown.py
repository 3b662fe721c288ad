"""Ticket descriptions as HTML: Markdown by markdown-it-py, raw HTML off, links and images http(s) only.

A description is text anyone with write access to the ticket folder wrote, shown to whoever opens
the dashboard: raw HTML is escaped (never passed through), a link or image whose URL is not
http(s) stays text, an image is shown as a link (the dashboard loads nothing from elsewhere), and
headings start below the page's own.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

from markupsafe import Markup, escape

from orchestrator.server.links import LINK_ATTRS, bare_urls, http_only

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

HEADING_SHIFT = 2  # the page has h1 (title) and h2 (Description): a "# heading" becomes h3


def render_markdown(text: str | None) -> Markup:
    """The Markdown text as safe HTML (see the module docstring for what is allowed)."""
    return Markup(_parser().render(text or ""))


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.validateLink = http_only  # type: ignore[method-assign]  # javascript:, data:, file: stay text
    md.core.ruler.push("bare_urls", _link_bare_urls)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("heading_open", _heading)
    md.add_render_rule("heading_close", _heading)
    return md


def _link_bare_urls(state: StateCore) -> None:
    """Turn http(s) URLs in plain text into links (outside links and code)."""
    from markdown_it.token import Token

    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        depth = 0
        for token in block.children:
            depth += token.type == "link_open"
            depth -= token.type == "link_close"
            urls = list(bare_urls(token.content)) if token.type == "text" and not depth else []
            if not urls:
                out.append(token)
                continue
            text, pos = token.content, 0
            for start, end in urls:
                if start > pos:
                    out.append(_text(Token, text[pos:start]))
                link = Token("link_open", "a", 1)
                link.attrs = {"href": text[start:end]}
                out += [link, _text(Token, text[start:end]), Token("link_close", "a", -1)]
                pos = end
            if pos < len(text):
                out.append(_text(Token, text[pos:]))
        block.children = out


def _text(token_cls: type[Token], content: str) -> Token:
    token = token_cls("text", "", 0)
    token.content = content
    return token


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    for name, value in LINK_ATTRS.items():
        tokens[idx].attrSet(name, value)
    return str(self.renderToken(tokens, idx, options, env))


def _image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    label = "image: " + (token.content or str(token.attrGet("src")))
    attrs = "".join(f' {k}="{escape(v)}"' for k, v in LINK_ATTRS.items())
    return f'<a href="{escape(token.attrGet("src") or "")}"{attrs}>{escape(label)}</a>'


def _heading(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    token.tag = f"h{min(6, int(token.tag[1]) + HEADING_SHIFT)}"
    return str(self.renderToken(tokens, idx, options, env))
