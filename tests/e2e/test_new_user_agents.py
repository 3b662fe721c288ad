"""A new user of each non-Claude agent: a fresh repository, `middle init`, `[coding_agent] kind`
switched, then the mistakes one makes on purpose (a CLI that is not there, a key not set, a base
URL nothing answers at, a model the CLI does not have): each is one `error:` line saying what to
do, a non-zero exit, no traceback, through the real `middle` and the agent's real CLI. (The middle
agent plans on the fake Messages API; one ticket on each agent's own fake: test_<agent>_e2e.py, and
a model the provider does not have, on Codex: test_codex_api_errors.py; a CLI that is not there,
for the others: test_<agent>_agent.py's missing-CLI test.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import plan

from orchestrator.fake_api import claude_code_env
from orchestrator.testing import make_repo

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))
CLIS = {"codex": "codex", "gemini": "gemini", "opencode": "opencode", "aider": "aider"}
UNREACHABLE_OPENCODE = ('{"provider":{"local":{"npm":"@ai-sdk/openai-compatible",'
                        '"options":{"baseURL":"http://127.0.0.1:9/v1"},"models":{"qwen":{}}}}}')

# kind -> (what is wrong, [coding_agent.options] lines, environment, words the error line must hold)
MISTAKES = [
    ("codex", "no CLI", 'cli_path = "/nonexistent/codex"\n', {}, "npm install -g @openai/codex@"),
    ("codex", "no key", 'provider = {name = "local", base_url = "LIVE/v1", env_key = "MY_KEY"}\n',
     {}, "Missing environment variable: `MY_KEY`. Check the API key"),
    ("codex", "bad base URL", 'provider = {name = "local", base_url = "http://127.0.0.1:9/v1", env_key = "MY_KEY"}\n',
     {"MY_KEY": "k"}, "nothing answers at Codex's model API http://127.0.0.1:9/v1 (connection refused"),
    ("gemini", "no key", "", {"GEMINI_API_KEY": ""}, "The Gemini CLI is not signed in: set GEMINI_API_KEY"),
    ("gemini", "bad base URL", "", {"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"},
     "nothing answers at Gemini CLI's model API http://127.0.0.1:9 (connection refused"),
    ("opencode", "unknown model", 'model = "nope/gpt-x"\n', {}, "OpenCode has no model nope/gpt-x"),
    ("opencode", "bad base URL", 'model = "local/qwen"\nturn_timeout_s = 20\n',
     {"OPENCODE_CONFIG_CONTENT": UNREACHABLE_OPENCODE}, "nothing answers at OpenCode's model API"),
    ("aider", "bad base URL", 'model = "openai/gpt-4.1"\nretry_timeout_s = 0\n',
     {"OPENAI_API_BASE": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"}, "nothing answers at aider's model API"),
]


@pytest.mark.parametrize("kind, wrong, options, env, words", MISTAKES, ids=[f"{m[0]}-{m[1]}" for m in MISTAKES])
def test_each_mistake_of_a_new_user_is_one_error_line(tmp_path, fake_api, kind, wrong, options, env, words):
    from orchestrator.testing.clis import require_cli

    if "cli_path" not in options:
        require_cli(CLIS[kind], f"the {kind} CLI (.ci/run installs it)")
    make_repo(tmp_path, {"README.md": "# p\n"})
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_", "OPENAI_", "GEMINI_", "GOOGLE_", "OPENCODE_"))}
    base = {**clean, **claude_code_env(fake_api.base_url, tmp_path / "claude-config"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".data"),
            "CODEX_HOME": str(home / ".codex")}

    def middle(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([MIDDLE, *args], cwd=tmp_path, env={**base, **env}, text=True, capture_output=True,
                              timeout=240)

    assert middle("init").returncode == 0
    toml = (tmp_path / "middle.toml").read_text()
    toml = toml.replace('kind = "claude-code"', f'kind = "{kind}"').replace('permission_mode = "acceptEdits"\n', "")
    options = options.replace("LIVE", fake_api.base_url)  # (a server that answers: the fake's)
    toml = re.sub(r"(\[coding_agent\.options\][^\n]*\n)", lambda m: m.group(1) + options, toml, count=1)
    (tmp_path / "middle.toml").write_text(toml)
    fake_api.script.agent(plan("Create hello.py with a hello() function."))
    result = middle("run")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert words in " ".join(output.split()), output
