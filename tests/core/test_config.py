"""Config: defaults, strict validation with the file named, MIDDLE_* and MEMORY_SAVE_DIR overrides."""

from __future__ import annotations

import pytest

from orchestrator.config import load_config
from orchestrator.errors import ConfigError


def test_defaults_without_a_file_mean_memory_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(environ={})
    assert cfg.memory_enabled is False and cfg.memory_dir is None
    assert cfg.agent.max_turns == 20 and cfg.worker.permission_mode == "acceptEdits"
    assert cfg.db_path == (tmp_path / ".middle" / "middle.sqlite3").resolve()


def test_file_values_and_relative_paths(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[memory]\nsave_dir = "mem"\nbackend = "sliding_window"\n[memory.options]\nwindow_size = 6\n')
    cfg = load_config(f, environ={})
    assert cfg.memory_enabled and cfg.memory_dir == (tmp_path / "mem").resolve()
    assert cfg.memory.options == {"window_size": 6}


def test_backend_none_means_memory_off_even_with_a_save_dir(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[memory]\nsave_dir = "mem"\nbackend = "none"\n')
    assert load_config(f, environ={}).memory_enabled is False


def test_unknown_key_names_file_and_key(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text("[agent]\nmax_turn = 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(f, environ={})
    assert str(f.resolve()) in str(err.value) and "agent.max_turn" in str(err.value)


def test_bad_values_and_bad_toml(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text("[agent]\nmax_turns = 0\n")
    with pytest.raises(ConfigError, match="max_turns"):
        load_config(f, environ={})
    f.write_text("[agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(f, environ={})


def test_missing_explicit_file(tmp_path):
    with pytest.raises(ConfigError, match="middle init"):
        load_config(tmp_path / "nope.toml", environ={})


def test_environment_overrides(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[agent]\nmax_turns = 9\n[memory]\nbackend = "sliding_window"\n')
    env = {"MIDDLE_AGENT_MAX_TURNS": "3", "MIDDLE_MEMORY_BACKEND": "none",
           "MEMORY_SAVE_DIR": str(tmp_path / "m"), "MIDDLE_WORKER_PERMISSION_MODE": "plan"}
    cfg = load_config(f, environ=env)
    assert cfg.agent.max_turns == 3 and cfg.memory.backend == "none"
    assert cfg.memory.save_dir == str(tmp_path / "m") and cfg.worker.permission_mode == "plan"


def test_config_file_save_dir_wins_over_memory_save_dir(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[memory]\nsave_dir = "from-file"\n')
    cfg = load_config(f, environ={"MEMORY_SAVE_DIR": "/elsewhere"})
    assert cfg.memory.save_dir == "from-file"
