"""Helpers for end-to-end runs: a fresh sample repo, a config, and an Orchestrator on the fake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from orchestrator.agent.llm import AnthropicLLM
from orchestrator.config.settings import Config
from orchestrator.fake_api import reply, text, tool_use, working_directory
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import make_repo
from orchestrator.workspace.git import git

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def fresh_project(tmp_path: Path, tickets: dict[str, str]) -> Path:
    """The sample repo as a git repository with one commit, and a ticket folder beside it."""
    shutil.copytree(EXAMPLES / "sample-repo", tmp_path / "repo")
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    for name, body in tickets.items():
        (tmp_path / "tickets" / name).write_text(body)
    return tmp_path / "repo"


def team_machine(tmp_path: Path, name: str, remote: Path, pg_url: str, fake_api: Any, claude_env: dict[str, str],
                 claude_cli: str, ticket: str, *, sync: bool = False, **config: Any) -> Orchestrator:
    """One machine of a team: its own clone of the shared repository `remote` (also [project]
    repo_url, where branches are pushed) and ticket folder, the team's PostgreSQL store, Claude
    Code with `claude_env`; `config` adds Config fields (e.g. memory)."""
    home = tmp_path / name
    git(tmp_path, "clone", "--quiet", str(remote), str(home / "repo"))
    (home / "tickets").mkdir()
    (home / "tickets" / "t1.md").write_text(ticket)
    cfg = Config(root=home, state_dir=str(home / "state"), store={"url": pg_url},
                 project={"path": "repo", "tickets_dir": "tickets", "repo_url": str(remote), "base_branch": "main"},
                 agent={"max_turns": 4, "max_cost_usd": 5.0},
                 coding_agent={"options": {"cli_path": claude_cli, "allowed_tools": ["Read", "Write", "Edit"],
                                     "turn_timeout_s": 120}}, **config)
    llm = AnthropicLLM(cfg.agent.model, base_url=fake_api.base_url, api_key="sk-fake-local", max_retries=0)
    orch = Orchestrator(cfg, llm=llm, coding_agent_env=claude_env, project_override=str(home / "repo"))
    if sync:
        orch.sync_tickets()
    return orch


def worktree(tmp_path: Path, ticket_id: str) -> Path:
    """Where a ticket's run works (state_dir is tmp_path/state in these tests)."""
    return tmp_path / "state" / "worktrees" / ticket_id


def config(tmp_path: Path, memory: bool, backend: str = "sliding_window") -> Config:
    return Config(
        root=tmp_path, state_dir=str(tmp_path / "state"),
        project={"path": "repo", "tickets_dir": "tickets"},
        agent={"max_turns": 4, "max_cost_usd": 5.0},
        coding_agent={"options": {"allowed_tools": ["Read", "Write", "Edit"], "turn_timeout_s": 120}},
        memory={"backend": backend, "save_dir": str(tmp_path / "mem") if memory else None},
    )


def orchestrator(cfg: Config, fake_api, claude_env: dict[str, str]) -> Orchestrator:
    llm = AnthropicLLM(cfg.agent.model, base_url=fake_api.base_url, api_key="sk-fake-local", max_retries=0)
    return Orchestrator(cfg, llm=llm, coding_agent_env=claude_env)


def write_file(rel: str, content: str):
    """A worker reply: Claude Code's own Write tool on an absolute path under its cwd."""
    def make(body: dict[str, Any]):
        cwd = working_directory(body)
        assert cwd, "the fake could not find Claude Code's working directory"
        return reply(tool_use("Write", {"file_path": f"{cwd}/{rel}", "content": content}))
    return make


def plan(prompt: str) -> str:
    return json.dumps({"prompt": prompt})


def decide(complete: bool, summary: str = "", next_prompt: str = "") -> str:
    return json.dumps({"complete": complete, "summary": summary, "next_prompt": next_prompt})


def done(msg: str):
    return reply(text(msg))


def body_text(request) -> str:
    return json.dumps(request.body, ensure_ascii=False)
