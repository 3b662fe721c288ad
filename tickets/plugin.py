"""Built-in plugin registering the Markdown folder and GitHub issues sources through the hook third parties use."""

from __future__ import annotations

from typing import Callable

import pluggy

# The marker orchestrator.plugin_api exports, made here: the tickets package imports no orchestrator.
hookimpl = pluggy.HookimplMarker("middle_agent")


@hookimpl
def register_ticket_sources(register: Callable[[type], None]) -> None:
    from tickets.github.source import GitHubIssuesSource
    from tickets.source import MarkdownFolderSource

    register(MarkdownFolderSource)
    register(GitHubIssuesSource)
