"""MIDDLE_* environment overrides of the config, through pydantic-settings.

Imported by `load_config` only when such a variable is set: pydantic-settings is a fair part of a
command's start-up time, and most commands run without any override.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, TypeVar

from pydantic import BaseModel
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from orchestrator.config.paths import ENV_PREFIX, is_setting

# The validated model (settings.Config), passed in: `settings` imports this module, not the reverse.
M = TypeVar("M", bound=BaseModel)


class _Environ(EnvSettingsSource):
    """The MIDDLE_* variables of a given mapping (not necessarily os.environ)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]):
        self._given = {k.lower(): v for k, v in environ.items() if is_setting(k)}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._given


def config_with_environment(model: type[M], data: dict[str, Any], environ: Mapping[str, str], *,
                            root: Path, source: Path | None) -> M:
    """The file's values with the environment's MIDDLE_* overrides on top, parsed by field type."""

    class EnvConfig(BaseSettings, model):  # type: ignore[misc,valid-type]
        model_config = SettingsConfigDict(
            extra="forbid", env_prefix=ENV_PREFIX, env_nested_delimiter="_", env_nested_max_split=1,
            case_sensitive=False,
        )

        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                       dotenv_settings, file_secret_settings):
            # Only the file (passed as init values) and the environment; the environment wins.
            return (_Environ(settings_cls, environ), init_settings)

    where: dict[str, Any] = {"root": root, "source": source}  # fields of `model`, unseen by mypy
    return EnvConfig(**data, **where)
