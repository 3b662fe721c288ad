"""`BackendOptions`, the pydantic base of every backend's options (exported by plugin_api).

Apart from plugin_api so that importing plugin_api (every plugin module does, at `middle --help`)
imports no pydantic: a backend's options are validated only when a command uses a backend.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BackendOptions(BaseModel):
    """Base for a backend's options: strict, so an unknown key in config is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)
