"""Configuration: `middle.toml` (or --config) and MIDDLE_* overrides. `settings` holds the
validated model and loader, `env` the environment overrides, `memo` what read-only commands
remember. The Python API imports `Config` and `load_config` from here; they load on first use, so
the light commands that only need the memo never import pydantic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names below resolve to, for type checkers
    from orchestrator.config.settings import Config, ConfigError, load_config, require_config_file  # noqa: F401

_PUBLIC = ("Config", "load_config", "require_config_file", "ConfigError")
__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        from orchestrator.config import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'orchestrator.config' has no attribute {name!r}")
