"""The GitHub flow with the real `middle` CLI and the real Claude Code CLI on the built-in fake
model: issues synced from the fake GitHub, run, a pull request opened on completion
([run] on_complete = "pr", by `middle run` and by a `middle worker`), shown by `middle log`, the
API and the ticket page, and a merge on GitHub read back by `middle sync`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.testing import make_repo
from orchestrator.testing.fake_github import FakeGitHub
from orchestrator.workspace.git import git, out
from tickets.store import TicketStore

pytestmark = [pytest.mark.cli, pytest.mark.slow]

MIDDLE = str(Path(sys.executable).with_name("middle"))


def issue(path: str, value: str) -> tuple[str, str]:
    """An issue the built-in demo model can do: create one file with the given content."""
    return f"Create {path}", f"Create `{path}` with:\n```python\n{value}\n```\n"


@pytest.fixture
def github():
    with FakeGitHub() as fake:
        yield fake


def middle(root: Path, github: FakeGitHub, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    result = subprocess.run([MIDDLE, *args], cwd=root, env={**env, "GITHUB_TOKEN": github.token}, text=True,
                            capture_output=True, timeout=300)
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    if ok:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def project(tmp_path: Path, github: FakeGitHub, claude_cli: str, store: str = "") -> tuple[Path, Path]:
    """A developer's clone of a bare remote, configured for the fake GitHub; returns (clone, remote)."""
    seed = make_repo(tmp_path / "seed", {"calc/__init__.py": "", "README.md": "calc\n"})
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(seed), str(remote))
    desk = tmp_path / "desk"
    git(tmp_path, "clone", "--quiet", str(remote), str(desk))
    (desk / "middle.toml").write_text(
        f'{store}[project]\npath = "."\nid = "calc"\nrepo_url = "{remote}"\nbase_branch = "main"\n'
        f'[tickets]\nkind = "github"\n[tickets.options]\nrepo = "me/app"\n'
        f'[github]\napi_url = "{github.url}"\n[run]\non_complete = "pr"\n'
        f'[coding_agent.options]\ncli_path = "{claude_cli}"\nturn_timeout_s = 120\n')
    return desk, remote


def test_issues_in_pull_requests_out(tmp_path, claude_cli, github):
    github.add_issue("me/app", *issue("calc/one.py", "ONE = 1"))
    github.add_issue("me/app", *issue("calc/two.py", "TWO = 2"))
    desk, remote = project(tmp_path, github, claude_cli)
    assert "2 new" in middle(desk, github, "sync").stdout

    run = middle(desk, github, "run", "--fake", "gh-1")
    assert "1 complete" in run.stdout
    posted = github.requests_to("/repos/me/app/pulls", "POST")
    assert len(posted) == 1 and posted[0].body["head"] == "middle/gh-1" and posted[0].body["base"] == "main"
    assert "Closes #1" in posted[0].body["body"] and "calc/one.py" in posted[0].body["body"]
    assert out(remote, "show", "middle/gh-1:calc/one.py") == "ONE = 1"
    number = next(iter(github.repos["me/app"].pulls))
    assert (
        f"pull request https://github.example/me/app/pull/{number} (open)" in middle(desk, github, "log", "gh-1").stdout
    )


def test_the_api_and_the_ticket_page_open_a_pull_request(tmp_path, claude_cli, github, monkeypatch):
    from fastapi.testclient import TestClient

    from orchestrator.config.settings import load_config
    from orchestrator.server import create_app

    github.add_issue("me/app", *issue("calc/two.py", "TWO = 2"))
    desk, remote = project(tmp_path, github, claude_cli)
    toml = (desk / "middle.toml").read_text().replace('on_complete = "pr"', 'on_complete = "none"')
    (desk / "middle.toml").write_text(toml)
    middle(desk, github, "sync")
    middle(desk, github, "run", "--fake", "gh-1")
    assert github.requests_to("/repos/me/app/pulls", "POST") == []  # on_complete = "none"

    monkeypatch.setenv("GITHUB_TOKEN", github.token)
    with TestClient(create_app(load_config(desk / "middle.toml"), fake=True), base_url="http://127.0.0.1") as client:
        page = client.get("/tickets/gh-1").text
        assert 'data-action="pr"' in page and "Open pull request" in page
        opened = client.post("/api/tickets/gh-1/pr")
        assert opened.status_code == 200, opened.text
        assert opened.json()["created"] is True and opened.json()["url"].endswith("/pull/2")
        assert client.get("/api/tickets/gh-1").json()["pr_url"] == opened.json()["url"]
        page = client.get("/tickets/gh-1").text
        assert 'id="pr-link"' in page and opened.json()["url"] in page and 'data-action="pr"' not in page
        again = client.post("/api/tickets/gh-1/pr")
        assert again.json()["created"] is False
    assert len(github.requests_to("/repos/me/app/pulls", "POST")) == 1
    assert out(remote, "show", "middle/gh-1:calc/two.py") == "TWO = 2"

    github.set_pull_state("me/app", 2, "merged")
    assert "merged gh-1: pull request" in middle(desk, github, "sync").stdout
    with TicketStore(desk / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("gh-1").status.value == "merged"


@pytest.mark.postgres
def test_a_worker_opens_the_pull_request_of_the_ticket_it_completes(tmp_path, claude_cli, github, pg_url):
    github.add_issue("me/app", *issue("calc/three.py", "THREE = 3"))
    desk, remote = project(tmp_path, github, claude_cli, store=f'[store]\nurl = "{pg_url}"\n')
    middle(desk, github, "sync")
    home = tmp_path / "machine-2"
    home.mkdir()
    (home / "middle.toml").write_text((desk / "middle.toml").read_text())
    result = middle(home, github, "worker", "--fake", "--once")
    assert "opened pull request" in result.stdout + result.stderr, result.stdout + result.stderr
    posted = github.requests_to("/repos/me/app/pulls", "POST")
    assert len(posted) == 1 and "Closes #1" in posted[0].body["body"]
    assert out(remote, "show", "middle/gh-1:calc/three.py") == "THREE = 3"
    with TicketStore(pg_url) as store:
        assert store.latest_run("gh-1")["pr_url"].endswith("/pull/2")


def test_the_ticket_page_button_opens_the_pull_request_in_a_browser(tmp_path, claude_cli, github, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
    from browser_helpers import start_browser, wait  # noqa: E402
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from orchestrator.config.settings import load_config
    from orchestrator.server import create_app
    from orchestrator.server.live import ServerThread

    github.add_issue("me/app", *issue("calc/four.py", "FOUR = 4"))
    desk, remote = project(tmp_path, github, claude_cli)
    (desk / "middle.toml").write_text((desk / "middle.toml").read_text().replace('"pr"', '"none"'))
    middle(desk, github, "sync")
    middle(desk, github, "run", "--fake", "gh-1")
    monkeypatch.setenv("GITHUB_TOKEN", github.token)
    driver = start_browser()
    try:
        with ServerThread(create_app(load_config(desk / "middle.toml"), fake=True)) as server:
            driver.get(f"{server.url}/tickets/gh-1")
            driver.find_element(By.CSS_SELECTOR, 'button[data-action="pr"]').send_keys(Keys.ENTER)
            link = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#pr-link"), "the pull request link")
            assert link[0].get_attribute("href") == "https://github.example/me/app/pull/2"
            assert not driver.find_elements(By.CSS_SELECTOR, 'button[data-action="pr"]')
    finally:
        driver.quit()
    assert len(github.requests_to("/repos/me/app/pulls", "POST")) == 1
    assert out(remote, "show", "middle/gh-1:calc/four.py") == "FOUR = 4"
