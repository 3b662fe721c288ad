"""Configuration: `middle.toml` (or --config), overridden by MIDDLE_* environment variables."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import ConfigError

CONFIG_FILE = "middle.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentConfig(_Strict):
    model: str = "claude-sonnet-5-5"
    max_tokens: int = Field(2048, gt=0)
    max_turns: int = Field(20, gt=0)
    max_cost_usd: float = Field(5.0, gt=0)
    base_url: str | None = None  # default: ANTHROPIC_BASE_URL, else the SDK's default


class WorkerConfig(_Strict):
    kind: str = "claude-code"
    permission_mode: str = "acceptEdits"
    allowed_tools: list[str] = ["Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "Bash"]
    cli_path: str | None = None
    model: str | None = None
    max_turns: int | None = Field(None, gt=0)  # Claude Code's own cap on tool rounds per turn
    turn_timeout_s: float = Field(900, gt=0)


class MemoryConfig(_Strict):
    save_dir: str | None = None  # None (and no MEMORY_SAVE_DIR) means memory off
    backend: str = "sliding_window"
    num_to_retrieve: int = Field(5, gt=0)
    llm_model: str | None = None  # cheaper tier for summaries; None: offline deterministic path
    options: dict[str, Any] = {}


class ProjectConfig(_Strict):
    id: str | None = None  # default project id for tickets that name none: the folder name
    path: str = "."
    tickets_dir: str = "tickets"


class Config(_Strict):
    agent: AgentConfig = AgentConfig()
    worker: WorkerConfig = WorkerConfig()
    memory: MemoryConfig = MemoryConfig()
    project: ProjectConfig = ProjectConfig()
    state_dir: str = ".middle"  # tickets DB, checkpoints, Claude Code config for fake runs
    root: Path = Field(default_factory=Path.cwd, exclude=True)  # relative paths resolve here

    def resolve(self, path: str | Path) -> Path:
        p = Path(os.path.expanduser(str(path)))
        return (p if p.is_absolute() else self.root / p).resolve()

    @property
    def memory_enabled(self) -> bool:
        return bool(self.memory.save_dir) and self.memory.backend != "none"

    @property
    def memory_dir(self) -> Path | None:
        return self.resolve(self.memory.save_dir) if self.memory_enabled else None

    @property
    def db_path(self) -> Path:
        return self.resolve(self.state_dir) / "middle.sqlite3"

    @property
    def checkpoint_path(self) -> Path:
        return self.resolve(self.state_dir) / "checkpoints.sqlite3"


def _parse_env_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """MIDDLE_<SECTION>_<KEY>=value (e.g. MIDDLE_MEMORY_BACKEND=none), parsed as JSON when it can be."""
    out: dict[str, Any] = {}
    sections = {"agent", "worker", "memory", "project"}
    for key, raw in environ.items():
        if not key.startswith("MIDDLE_") or key == "MIDDLE_CONFIG":
            continue
        rest = key[len("MIDDLE_"):].lower()
        section, _, field = rest.partition("_")
        if section in sections and field:
            out.setdefault(section, {})[field] = _parse_env_value(raw)
        elif rest == "state_dir":
            out["state_dir"] = raw
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in over.items():
        merged[k] = _merge(merged[k], v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
    return merged


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read the config file (if any), apply environment overrides, validate strictly."""
    environ = dict(os.environ if environ is None else environ)
    explicit = path or environ.get("MIDDLE_CONFIG")
    file = Path(explicit) if explicit else Path.cwd() / CONFIG_FILE
    data: dict[str, Any] = {}
    if file.exists():
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file.resolve()}: not valid TOML ({exc}); fix the file") from None
    elif explicit:
        raise ConfigError(f"config file {file} does not exist: create it with `middle init`")
    if environ.get("MEMORY_SAVE_DIR"):  # seed 000's variable: used when the file sets no save_dir
        data.setdefault("memory", {}).setdefault("save_dir", environ["MEMORY_SAVE_DIR"])
    data = _merge(data, env_overrides(environ))
    try:
        cfg = Config(**data, root=file.resolve().parent)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{file.resolve()}: {problems}") from None
    return cfg
