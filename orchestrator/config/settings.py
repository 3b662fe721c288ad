"""Configuration: `middle.toml` (or --config), overridden by MIDDLE_* environment variables.

Environment overrides come from pydantic-settings (`orchestrator.config.env`, imported only when a
MIDDLE_* setting is set, so a plain command starts fast): `MIDDLE_<SECTION>_<KEY>` is parsed by
the field's type (`MIDDLE_PROJECT_ID=2024` is the text "2024", `MIDDLE_AGENT_MAX_TURNS=5` a
number; lists and tables are JSON), and a bad value is reported naming the variable, not the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.config.paths import ENV_PREFIX, OTHER_VARIABLES, find_config_file, is_setting  # noqa: F401
from orchestrator.errors import ConfigError
from orchestrator.names import CONFIG_FILE, DEFAULT_BACKEND  # noqa: E402 - re-exported

if TYPE_CHECKING:
    from orchestrator.config.source_settings import SourceSettings

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def _postgres_url(value: str | None, unset: str) -> str | None:
    """A `url` setting: a PostgreSQL URL, or None (`unset` says what is used then)."""
    if value and not value.startswith(POSTGRES_SCHEMES):
        raise ValueError(f"{value.split('://')[0]!r} is not a PostgreSQL URL: write "
                         f"postgresql://user@host/db, or leave it unset for {unset}")
    return value or None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Provider = Literal["anthropic", "bedrock", "vertex", "openai-compatible", "claude-code", "codex"]

# Which `[agent]` options each provider reads: naming one the provider ignores is an error, so a
# setting never silently does nothing (e.g. `region` with provider = "anthropic").
PROVIDER_OPTIONS: dict[str, tuple[str, ...]] = {
    "anthropic": ("base_url",),
    "bedrock": ("base_url", "region", "aws_profile"),
    "vertex": ("base_url", "region", "project_id"),
    "openai-compatible": ("base_url", "api_key_env", "json_schema", "parse_retries"),
    "claude-code": ("cli_path",),
    "codex": ("cli_path", "base_url", "api_key_env"),
}


class AgentConfig(_Strict):
    """`[agent]`: the middle agent's model and where it is reached (`provider`; docs/providers.md)."""

    provider: Provider = "anthropic"
    model: str = "claude-sonnet-5-5"
    max_tokens: int = Field(2048, gt=0)
    max_turns: int = Field(20, gt=0)
    max_cost_usd: float = Field(5.0, gt=0)
    # anthropic: default ANTHROPIC_BASE_URL, else the SDK's; bedrock / vertex: the endpoint
    # (default ANTHROPIC_BEDROCK_BASE_URL / ANTHROPIC_VERTEX_BASE_URL, else the region's);
    # openai-compatible: required (e.g. http://localhost:11434/v1 for Ollama)
    base_url: str | None = None
    region: str | None = None  # bedrock: default AWS_REGION / the profile's; vertex: CLOUD_ML_REGION
    aws_profile: str | None = None  # bedrock: default AWS_PROFILE, else boto3's credential chain
    project_id: str | None = None  # vertex: default ANTHROPIC_VERTEX_PROJECT_ID, else the ADC's project
    # openai-compatible: the environment variable holding the key (default OPENAI_API_KEY; a
    # local server such as Ollama needs none: then no key is sent)
    api_key_env: str | None = None
    # openai-compatible: "auto" asks for a JSON-schema reply and falls back to a checked parse
    # when the server refuses it; "always" never falls back; "never" always parses
    json_schema: Literal["auto", "always", "never"] = "auto"
    parse_retries: int = Field(2, ge=0, le=5)  # openai-compatible: re-asks when a reply is not the JSON asked for
    cli_path: str | None = None  # claude-code: default PATH, then the copy bundled in claude-agent-sdk
    # Seconds one call to the model may take, each retry again (a CLI provider: the whole call,
    # its own retries included); past it the call is given up with one line naming the provider.
    timeout_s: float = Field(300.0, gt=0)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not value.replace("_", "").isalnum():
            raise ValueError(f"{value!r} is not an environment variable name: write e.g. \"OPENROUTER_API_KEY\"")
        return value

    @model_validator(mode="after")
    def _options_fit_provider(self) -> "AgentConfig":
        used = PROVIDER_OPTIONS[self.provider]
        for name in ("base_url", "region", "aws_profile", "project_id", "api_key_env", "json_schema",
                     "parse_retries", "cli_path"):
            # set, and to something else than its default (a config dumped and read back sets
            # every field, each to what it was)
            given = name in self.model_fields_set and getattr(self, name) != type(self).model_fields[name].default
            if given and name not in used:
                users = [p for p, names in PROVIDER_OPTIONS.items() if name in names]
                raise ValueError(f"{name} is an option of provider {' / '.join(users)}, not of "
                                 f"{self.provider!r}: remove it or set provider")
        if self.provider == "openai-compatible":
            if not self.base_url:
                raise ValueError("provider \"openai-compatible\" needs base_url: the server's address, "
                                 "e.g. base_url = \"http://localhost:11434/v1\" (Ollama)")
            if "model" not in self.model_fields_set:
                raise ValueError("provider \"openai-compatible\" needs model: the model name the server "
                                 "knows, e.g. model = \"llama3.1\"")
        return self


class CodingAgentConfig(_Strict):
    """`[coding_agent] kind` picks the coding agent; `[coding_agent.options]` is validated by its Options model."""

    kind: str = "claude-code"
    options: dict[str, Any] = {}


class TicketsConfig(_Strict):
    """`[tickets] kind` picks the ticket source (a plugin may add one); `[tickets.options]` are its own."""

    kind: str = "markdown"  # the folder of [project] tickets_dir, unless options name another
    options: dict[str, Any] = {}


class MemoryConfig(_Strict):
    save_dir: str | None = None  # None (and no MEMORY_SAVE_DIR) means memory off
    backend: str = DEFAULT_BACKEND
    num_to_retrieve: int = Field(5, gt=0)
    llm_model: str | None = None  # cheaper tier for summaries; None: offline deterministic path
    # A memory is kept whole up to max_doc_chars (a long chat, a session transcript's section:
    # about 5,000 tokens, 20 embedding windows); what the agent is shown is capped apart, by
    # memories_budget_chars (about 500 tokens per injection).
    max_doc_chars: int = Field(20000, gt=0)
    # A query longer than this is refused (the memory API, `middle memory search`), or cut to
    # it (the middle agent's own recall at ticket start): the agent's per-turn queries are
    # ~1,000 characters, and a 4 MB one held every memory call of the project for 18 s.
    max_query_chars: int = Field(4000, gt=0)
    # The docs (or queries) of one call from a client (the memory API, the CLI) hold at most
    # this many characters in all: 20 docs of 20,000 characters in one index call (each within
    # max_doc_chars) once held the project's memory for 51 s. A larger call is a 413.
    max_request_chars: int = Field(100_000, gt=0)
    memories_budget_chars: int = Field(2000, gt=0)
    # The block's "Recent work": the newest N tickets of the project (0: none), within
    # recent_share of memories_budget_chars; the rest is "Related work from any time".
    recent_tickets: int = Field(20, ge=0)  # memory.format.DEFAULT_RECENT_TICKETS: why 20
    recent_share: float = Field(0.4, ge=0, le=1)
    # "Related work" leaves out the newest N tickets (memory.format.DEFAULT_RELATED_WINDOW: why).
    related_window: int = Field(20, ge=0)
    # "postgresql://...": the stores of backends that can share a database (hybrid, dense,
    # bm25) live there, one database for every project and machine; also MIDDLE_MEMORY_URL.
    # None: the [store] url when it names PostgreSQL, else per machine under save_dir.
    url: str | None = None
    options: dict[str, Any] = {}

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        return _postgres_url(value, "per-machine stores")


class ProjectConfig(_Strict):
    id: str | None = None  # default project id for tickets that name none: the folder name
    path: str = "."
    tickets_dir: str = "tickets"
    # The branch tickets start from and merge into; `middle init` records the branch checked out
    # then. Unset: the branch checked out in the project's repository when a ticket starts.
    base_branch: str | None = None
    # "worktree": each ticket on its own branch in .middle/worktrees/<id> (the user's working tree
    # is never written by a run). "none": Claude Code edits the project directory in place.
    isolation: Literal["worktree", "none"] = "worktree"
    # The shared repository (`middle worker` clones it, fetches it before each ticket and pushes
    # each ticket's branch to it; `middle merge` on another machine fetches the branch from it;
    # `middle merge` and `middle revert` push the base branch to it; tickets start from its base branch).
    repo_url: str | None = None
    # A longer ticket file is refused at load: it would be planned with, sent to Claude Code (which
    # refuses a prompt that long) and copied into every store.
    max_ticket_chars: int = Field(100_000, gt=0)


class CheckCommand(_Strict):
    """One `[[check.commands]]` table: a shell line and how its result is compared with the base's.

    A plain string in `commands` is the same as `{run = "..."}` with every default."""

    run: str  # the shell line, run in the ticket's worktree
    # JUnit XML the command writes (a glob, relative to where it runs: "reports/*.xml"); pytest and
    # `python -m unittest` need none (middle asks them for a report of its own), nor do
    # `node --test`, jest, vitest and mocha (orchestrator/checks/runners/javascript.py)
    junit: str | None = None
    # how failures are told apart: "auto" (a JUnit report when there is one, else diagnostics
    # lines `path:line[:col]: message` when the output has them, or TAP lines `ok 1 - name` under a
    # plan `1..N`), "junit", "diagnostics", "tap" (its output is TAP: bats, `prove -v`, tape), or
    # "exit-code" (the exit code alone)
    format: Literal["auto", "junit", "diagnostics", "tap", "exit-code"] = "auto"
    # when the command already fails on the base and names no failures that can be compared:
    # "per-failure" (the default: failing with the base's own output is undecided, the ticket stops
    # for a person; failing differently, the ticket must make it pass) or "exit-code" (failing with
    # the base's exit code and output counts as no worse, and is shown as such; docs/checks.md)
    baseline: Literal["per-failure", "exit-code"] = "per-failure"

    @field_validator("run")
    @classmethod
    def _run(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a check command is empty: write shell lines such as \"python -m pytest -q\"")
        return value

    @field_validator("junit")
    @classmethod
    def _junit(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or Path(value).is_absolute() or ".." in Path(value).parts):
            raise ValueError(f"junit = {value!r}: name the report as a path or glob inside the project, "
                             "relative to it, e.g. \"reports/*.xml\"")
        return value


class CheckConfig(_Strict):
    """`[check]`: the project's checks, run in the ticket's worktree when the middle agent says the
    ticket is complete; a failure goes back to it (a correction), at most `max_rounds` times. A
    ticket's `check:` front matter replaces `commands` (`check: []`: none)."""

    # shell lines or `[[check.commands]]` tables, run in order, e.g. ["python -m pytest -q"]
    commands: list[str | CheckCommand] = []
    timeout_s: float = Field(900.0, gt=0)  # per command; a check that takes longer fails, saying so
    max_rounds: int = Field(3, ge=0)  # check failures fed back before the ticket fails

    @field_validator("commands", mode="before")
    @classmethod
    def _tables(cls, value: Any) -> Any:
        """A table is read as a CheckCommand here, so a mistake in it is said once, by its key
        (not also as "not a string")."""
        if not isinstance(value, list):
            return value
        out: list[Any] = []
        for n, item in enumerate(value, 1):
            if isinstance(item, dict):
                try:
                    item = CheckCommand.model_validate(item)
                except ValidationError as exc:
                    said = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                            for e in exc.errors()]
                    raise ValueError(f"command {n}: " + "; ".join(said)) from None
            out.append(item)
        return out

    @field_validator("commands")
    @classmethod
    def _commands(cls, value: list[str | CheckCommand]) -> list[str | CheckCommand]:
        if any(isinstance(c, str) and not c.strip() for c in value):
            raise ValueError("a check command is empty: write shell lines such as \"python -m pytest -q\"")
        return value


class WorktreeConfig(_Strict):
    """`[worktree]`: what a new ticket worktree needs to run the checks: untracked files copied from
    the project (`.env`, a local config) and setup commands run once in it (`pip install -e .`).
    What these leave in the worktree is never committed."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # `copy = [...]` in the file (a field may not be called `copy` in pydantic): paths or globs,
    # relative to the project
    copy_paths: list[str] = Field(default_factory=list, alias="copy")
    setup: list[str] = []  # shell lines, run in order in the new worktree before Claude Code starts
    setup_timeout_s: float = Field(1800.0, gt=0)  # per setup command


class GithubConfig(_Strict):
    """`[github]`: where the GitHub API is (GitHub Enterprise: its /api/v3 URL) and the token's variable."""

    api_url: str = "https://api.github.com"
    token_env: str = "GITHUB_TOKEN"  # secrets only from the environment
    max_wait_s: float = Field(60.0, ge=0)  # the longest rate-limit wait before giving up
    # The repository pull requests go to (OWNER/REPO); unset: a gh- ticket's own, the github
    # ticket source's, else the one [project] repo_url (or `origin`) names on GitHub.
    repo: str | None = None
    # Review rounds a pull request starts by itself (its failed CI, a review requesting changes,
    # read by `middle sync`) before it waits for a person's `middle feedback`.
    auto_rounds: int = Field(2, ge=0)


class StoreConfig(_Strict):
    """`[store]`: where tickets, runs, claims, run events and checkpoints live."""

    # None: SQLite files under state_dir (one machine). "postgresql://user:pass@host/db": one
    # shared database for a team's machines (`middle worker`); also MIDDLE_STORE_URL.
    url: str | None = None
    # How long a PostgreSQL call keeps retrying while the server is unreachable (a restart).
    # Past it a run in progress is interrupted, saying so, and a worker resumes it once the
    # store is back.
    reconnect_s: float = Field(60.0, gt=0)
    # Days to keep the run events and checkpoints of ended runs; `middle gc` prunes older ones
    # (None: keep them all, the default; `middle gc --runs-older-than` prunes once).
    keep_days: int | None = Field(None, gt=0)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        return _postgres_url(value, "the SQLite files under state_dir")  # else it names a file


class RunConfig(_Strict):
    """`[run]`: how a batch of tickets runs (`middle run`, `middle serve`)."""

    parallel: int = Field(1, gt=0, le=64)  # tickets at once, each in its own worktree
    # The whole batch stops starting tickets once Claude Code's reported cost reaches this.
    max_cost_usd_total: float | None = Field(None, gt=0)
    # A ticket with depends_on starts once each dependency is merged (default) or complete (it
    # then branches from the dependencies' branches).
    dependencies: Literal["merged", "complete"] = "merged"
    # How long a claim holds without its runner's heartbeat: a machine that died (or a killed
    # worker) gives its tickets up after this, and another runner takes them over.
    lease_s: float = Field(120.0, ge=1.0)
    # "pr": open a pull request for every ticket that completes (`middle pr`), on any runner.
    on_complete: Literal["none", "pr"] = "none"
    # A run something passing stopped (a Claude Code turn that crashed or timed out, the store
    # out of reach, a stopped worker) is resumed by any worker up to `retries` times, after
    # `retry_wait_s`, then twice that, and so on; never one whose check failed or that the
    # middle agent failed.
    retries: int = Field(3, ge=0, le=20)
    retry_wait_s: float = Field(5.0, ge=0)


class ServerConfig(_Strict):
    """`[server]`: `middle serve`'s named tokens."""

    # A name per token: `tokens = {alice = "MIDDLE_TOKEN_ALICE"}` (name -> the environment
    # variable that holds the token: secrets only from the environment). A change made with a
    # token (the API, or the board signed in with it) is recorded as made by its name.
    # MIDDLE_API_TOKEN still works alongside them, named "MIDDLE_API_TOKEN".
    tokens: dict[str, str] = {}

    @field_validator("tokens")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name, env in value.items():
            if not name.strip() or len(name) > 64 or any(c in name for c in "\r\n\t"):
                raise ValueError(f"token name {name!r} must be 1 to 64 characters on one line")
            if not env.strip() or not env.replace("_", "").isalnum():
                raise ValueError(f"token {name!r}: {env!r} is not an environment variable's name "
                                 "(the token itself belongs in the environment, not in middle.toml)")
        return value


class Config(_Strict):

    agent: AgentConfig = AgentConfig()
    coding_agent: CodingAgentConfig = CodingAgentConfig()
    # `[coding_agents.<kind>]`: the options of a coding agent a ticket picks with `coding_agent:`
    # (the configured kind's `[coding_agent.options]` are laid over its table, when it has one).
    coding_agents: dict[str, dict[str, Any]] = {}
    tickets: TicketsConfig = TicketsConfig()
    check: CheckConfig = CheckConfig()
    worktree: WorktreeConfig = WorktreeConfig()
    memory: MemoryConfig = MemoryConfig()
    project: ProjectConfig = ProjectConfig()
    run: RunConfig = RunConfig()
    store: StoreConfig = StoreConfig()
    github: GithubConfig = GithubConfig()
    server: ServerConfig = ServerConfig()
    state_dir: str = ".middle"  # tickets DB, checkpoints, Claude Code config for fake runs
    root: Path = Field(default_factory=Path.cwd, exclude=True)  # relative paths resolve here
    source: Path | None = Field(None, exclude=True)  # the config file read, if any

    def resolve(self, path: str | Path) -> Path:
        p = Path(os.path.expanduser(str(path)))
        return (p if p.is_absolute() else self.root / p).resolve()

    def source_settings(self) -> SourceSettings:
        """What opening the ticket source needs (the read-only commands' ReadConfig gives the same)."""
        from orchestrator.config.source_settings import SourceSettings

        return SourceSettings(self.tickets.kind, dict(self.tickets.options), str(self.root),
                              str(self.resolve(self.project.tickets_dir)), str(self.resolve(self.project.path)),
                              self.project.max_ticket_chars, self.project.id, str(self.state_path),
                              self.github.model_dump())

    @property
    def memory_enabled(self) -> bool:
        return bool(self.memory.save_dir) and self.memory.backend != "none"

    @property
    def memory_dir(self) -> Path | None:
        return self.resolve(self.memory.save_dir) if self.memory.save_dir and self.memory_enabled else None

    @property
    def memory_url(self) -> str | None:
        """The database of shared memory stores: [memory] url, else a PostgreSQL [store] url."""
        return self.memory.url or self.store.url  # both validated as PostgreSQL URLs

    def memory_limits(self) -> dict[str, Any]:
        """The size caps and block split the memory facade applies (see [memory] in README)."""
        return {"max_doc_chars": self.memory.max_doc_chars,
                "max_query_chars": self.memory.max_query_chars,
                "max_request_chars": self.memory.max_request_chars,
                "memories_budget_chars": self.memory.memories_budget_chars,
                "recent_tickets": self.memory.recent_tickets,
                "recent_share": self.memory.recent_share,
                "related_window": self.memory.related_window}

    @property
    def state_path(self) -> Path:
        return self.resolve(self.state_dir)

    @property
    def db_path(self) -> Path:
        return self.state_path / "middle.sqlite3"

    @property
    def checkpoint_path(self) -> Path:
        return self.state_path / "checkpoints.sqlite3"

    @property
    def store_target(self) -> str | Path:
        """The ticket store: the [store] url, else the SQLite file under state_dir."""
        return self.store.url or self.db_path

    @property
    def checkpoint_target(self) -> str | Path:
        """The checkpoint store: the [store] url, else its own SQLite file under state_dir."""
        return self.store.url or self.checkpoint_path

    @property
    def clone_path(self) -> Path:
        """`middle worker`'s own clone of [project] repo_url."""
        return self.state_path / "clone"

    @property
    def worktrees_path(self) -> Path:
        """Where ticket worktrees live: `<state_dir>/worktrees/<ticket-id>`."""
        return self.state_path / "worktrees"


_OLD_WORKER_KEYS = {"permission_mode", "allowed_tools", "cli_path", "model", "max_turns",
                    "turn_timeout_s", "extra_args"}


def _where(loc: tuple[Any, ...], environ: Mapping[str, str], file: Path | None) -> str:
    """Name the environment variable that set a value, else the config file."""
    names = [str(x) for x in loc]
    for n in range(len(names), 0, -1):
        var = ENV_PREFIX + "_".join(names[:n]).upper()
        if any(k.upper() == var for k in environ):
            return f"environment variable {var}"
    return str(file) if file else "the configuration"


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the config file (if any), apply environment overrides, validate strictly."""
    environ = dict(os.environ if environ is None else environ)
    explicit = path or environ.get("MIDDLE_CONFIG")
    file = Path(explicit) if explicit else find_config_file(Path.cwd())
    data: dict[str, Any] = {}
    if file.is_file():
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file.resolve()}: not valid TOML ({exc}); fix the file") from None
        except OSError as exc:
            raise ConfigError(f"cannot read {file.resolve()} ({exc.strerror}); check its permissions") from None
    elif file.exists():
        raise ConfigError(f"{file.resolve()} is not a file: pass the config file with --config")
    elif explicit:
        raise ConfigError(f"config file {file} does not exist: run `middle init` in the project, "
                          f"or create it with `middle --config {file} init`")
    if "worker" in data:  # the section's name before 0.2 ("worker" is a fleet machine now)
        raise ConfigError(
            f"{file.resolve()}: the [worker] section is now called [coding_agent] (and [worker.options] "
            "[coding_agent.options]): rename those headers")
    old = _OLD_WORKER_KEYS & set(data.get("coding_agent") or {})
    if old:
        raise ConfigError(
            f"{file.resolve()}: [coding_agent] {', '.join(sorted(old))} belong under [coding_agent.options] "
            "(the coding agent's kind validates them): move those lines below a `[coding_agent.options]` header")
    if environ.get("MEMORY_SAVE_DIR"):  # the memory contract's variable: used when the file sets no save_dir
        data.setdefault("memory", {}).setdefault("save_dir", environ["MEMORY_SAVE_DIR"])
    source = file.resolve() if file.is_file() else None
    _check_variable_names(environ)
    environ = _coding_agent_variables(environ, data)
    try:
        if any(is_setting(k) for k in environ):
            from orchestrator.config.env import config_with_environment

            return config_with_environment(Config, data, environ, root=file.resolve().parent, source=source)
        return Config(**data, root=file.resolve().parent, source=source)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg'].removeprefix('Value error, ')}{_moved(e)} "
            f"(in {_where(e['loc'], environ, source)})"
            for e in exc.errors()
        )
        raise ConfigError(f"bad configuration: {problems}") from None


# Options of the coding agents (every built-in has them) a user puts under [agent] or [run]: the
# error says where they go instead of only "Extra inputs are not permitted".
_CODING_AGENT_OPTIONS = frozenset({"turn_timeout_s", "cli_path", "extra_args", "price", "permission_mode",
                                   "allowed_tools"})


def _moved(error: Any) -> str:
    loc = list(error.get("loc") or ())
    if error.get("type") == "extra_forbidden" and len(loc) == 2 and loc[1] in _CODING_AGENT_OPTIONS:
        return (f": `{loc[1]}` is a coding agent's option, set under [coding_agent.options] (`middle agents` "
                "lists each agent's)")
    return ""


_SECTIONS = ("agent", "coding_agent", "tickets", "check", "worktree", "memory", "project", "run", "store", "github")


def _check_variable_names(environ: Mapping[str, str]) -> None:
    """A MIDDLE_* variable that names no setting is a typo: say so rather than ignore it."""
    for key in environ:
        upper = key.upper()
        if not upper.startswith(ENV_PREFIX) or upper in OTHER_VARIABLES or upper == "MIDDLE_STATE_DIR":
            continue
        if upper.startswith(ENV_PREFIX + "WORKER_"):
            raise ConfigError(f"environment variable {key}: the [worker] section is now called [coding_agent]: "
                              f"set {ENV_PREFIX}CODING_AGENT_{upper[len(ENV_PREFIX + 'WORKER_'):]} instead")
        rest = upper[len(ENV_PREFIX):].lower()
        section = next((s for s in _SECTIONS if rest.startswith(s + "_")), rest.split("_", 1)[0])
        if section not in _SECTIONS:
            raise ConfigError(
                f"environment variable {key} names no setting: use MIDDLE_<SECTION>_<KEY> with a "
                f"section of {', '.join(_SECTIONS)} (e.g. MIDDLE_AGENT_MAX_TURNS), or unset it")


CODING_AGENT_VARIABLES = {"KIND": "kind", "OPTIONS": "options"}


def _coding_agent_variables(environ: dict[str, str], data: dict[str, Any]) -> dict[str, str]:
    """MIDDLE_CODING_AGENT_KIND / _OPTIONS (a JSON object), put into the file's values by hand:
    the other sections' variables are split at their first `_` by pydantic-settings, which cannot
    tell this section's name from a key. The environment (without them) is returned."""
    import json

    rest = dict(environ)
    prefix = ENV_PREFIX + "CODING_AGENT_"
    for key in list(environ):
        upper = key.upper()
        if not upper.startswith(prefix):
            continue
        field = CODING_AGENT_VARIABLES.get(upper[len(prefix):])
        if field is None:
            raise ConfigError(f"environment variable {key} names no setting of [coding_agent]: use "
                              f"{prefix}KIND or {prefix}OPTIONS (a JSON object), or unset it")
        value: Any = rest.pop(key)
        if field == "options":
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"environment variable {key} is not JSON ({exc}): give a JSON object, "
                                  'e.g. {"turn_timeout_s": 600}') from None
            if not isinstance(value, dict):
                raise ConfigError(f"environment variable {key} must be a JSON object, e.g. "
                                  '{"turn_timeout_s": 600}')
            value = {**(data.get("coding_agent") or {}).get("options", {}), **value}
        data.setdefault("coding_agent", {})[field] = value
    return rest


def require_config_file(config: Config) -> None:
    """Commands that act on a project need its middle.toml: say so, and how to make one."""
    if config.source is None:
        raise ConfigError(
            f"no {CONFIG_FILE} in {config.root} or any folder above it: run `middle init` in your "
            "project's top folder (the one holding your repository), or pass --config FILE (or set "
            "MIDDLE_CONFIG)")
