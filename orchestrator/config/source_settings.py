"""What opening the ticket source needs from the config, one shape for the config's two: the
validated Config (`Config.source_settings()`) and the read-only commands' remembered ReadConfig."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SourceSettings:
    """What opening the ticket source needs from the config, read the same way from both of its
    shapes: the validated Config (`Config.source_settings()`) and the remembered ReadConfig."""

    kind: str  # [tickets] kind
    options: dict[str, Any]  # [tickets.options]
    root: str
    tickets_dir: str  # absolute
    project_path: str  # absolute
    max_ticket_chars: int
    project_id: str | None
    state_dir: str  # absolute
    github: dict[str, Any]  # [github]
