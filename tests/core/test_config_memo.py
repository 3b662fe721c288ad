"""The read-only commands' config memo: the same values as the full config, and only a cache."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from orchestrator.config import memo
from orchestrator.config.settings import load_config
from orchestrator.errors import ConfigError
from orchestrator.plugins.manager import check_options

read_config = partial(memo.read_config, check=check_options)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "proj" / "work").mkdir(parents=True)
    (tmp_path / "proj" / "middle.toml").write_text(
        '[project]\nid = "p"\ntickets_dir = "backlog"\npath = "work"\nmax_ticket_chars = 500\n'
        '[run]\ndependencies = "complete"\n')
    return tmp_path / "proj"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"MIDDLE_AGENT_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path), **extra}


def _memo(tmp_path: Path) -> Path:
    return next((tmp_path / "cache" / "config").glob("*.json"))


def test_the_values_are_the_full_configs(project, tmp_path, monkeypatch):
    monkeypatch.chdir(project / "work")  # found from a subfolder, as every command finds it
    env = _env(tmp_path)
    config = load_config(environ=env)
    for view in (read_config(environ=env), read_config(environ=env)):  # validated, then remembered
        assert view.source == str(project / "middle.toml")
        assert view.store_target == str(config.store_target)
        assert view.tickets_dir == str(project / "backlog")
        assert view.project_path == str(project / "work")
        assert (view.max_ticket_chars, view.dependencies) == (500, "complete")


def test_no_config_is_the_same_error_as_every_command_gives(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="no middle.toml .* run `middle init`"):
        read_config(environ=_env(tmp_path))
    with pytest.raises(ConfigError, match="does not exist"):
        read_config(tmp_path / "nope.toml", environ=_env(tmp_path))


def test_an_invalid_config_is_never_remembered(project, tmp_path):
    (project / "middle.toml").write_text('[run]\nparallel = 0\n')
    for _ in range(2):
        with pytest.raises(ConfigError, match="parallel"):
            read_config(project / "middle.toml", environ=_env(tmp_path))
    assert not (tmp_path / "cache" / "config").exists()


@pytest.mark.parametrize("tamper", [
    lambda entry: "{not json",
    lambda entry: json.dumps({**entry, "config": {**entry["config"], "max_ticket_chars": "500"}}),
    lambda entry: json.dumps({**entry, "config": {**entry["config"], "extra": 1}}),
    lambda entry: json.dumps({**entry, "config": None}),
    lambda entry: json.dumps({**entry, "config": {**entry["config"], "dependencies": "bogus"}}),
])
def test_a_corrupt_or_foreign_memo_is_validated_again(project, tmp_path, tamper):
    env = _env(tmp_path)
    read_config(project / "middle.toml", environ=env)
    memo = _memo(tmp_path)
    memo.write_text(tamper(json.loads(memo.read_text())))
    view = read_config(project / "middle.toml", environ=env)
    assert (view.max_ticket_chars, view.dependencies) == (500, "complete")
    assert json.loads(memo.read_text())["config"]["max_ticket_chars"] == 500  # rewritten


def test_the_api_token_never_reaches_the_memo(project, tmp_path):
    read_config(project / "middle.toml", environ=_env(tmp_path, MIDDLE_API_TOKEN="s3cret-token"))
    memo = _memo(tmp_path)
    assert "s3cret-token" not in memo.read_text()
    assert memo.stat().st_mode & 0o077 == 0  # only its user can read it (a URL may hold a password)
