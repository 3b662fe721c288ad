"""Config: defaults, strict validation with the file named, MIDDLE_* and MEMORY_SAVE_DIR overrides."""

from __future__ import annotations

import pytest

from orchestrator.config.settings import load_config
from orchestrator.errors import ConfigError


def test_defaults_without_a_file_mean_memory_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(environ={})
    assert cfg.memory_enabled is False and cfg.memory_dir is None
    assert cfg.agent.max_turns == 20 and cfg.coding_agent.kind == "claude-code" and cfg.coding_agent.options == {}
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
    assert "environment variable" not in str(err.value)


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
           "MEMORY_SAVE_DIR": str(tmp_path / "m"), "MIDDLE_CODING_AGENT_OPTIONS": '{"permission_mode": "plan"}'}
    cfg = load_config(f, environ=env)
    assert cfg.agent.max_turns == 3 and cfg.memory.backend == "none"
    assert cfg.memory.save_dir == str(tmp_path / "m") and cfg.coding_agent.options == {"permission_mode": "plan"}


def test_config_file_save_dir_wins_over_memory_save_dir(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[memory]\nsave_dir = "from-file"\n')
    cfg = load_config(f, environ={"MEMORY_SAVE_DIR": "/elsewhere"})
    assert cfg.memory.save_dir == "from-file"


def test_environment_values_are_parsed_by_the_fields_type(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"MIDDLE_PROJECT_ID": "2024", "MIDDLE_AGENT_MODEL": "null", "MIDDLE_AGENT_MAX_COST_USD": "0.5",
           "MIDDLE_STATE_DIR": "state", "MIDDLE_MEMORY_OPTIONS": '{"window_size": 4}'}
    cfg = load_config(environ=env)
    assert cfg.project.id == "2024" and cfg.agent.model == "null"  # text fields stay text
    assert cfg.agent.max_cost_usd == 0.5 and cfg.state_dir == "state"
    assert cfg.memory.options == {"window_size": 4}


def test_a_bad_environment_value_names_the_variable_not_the_file(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text("[agent]\nmax_turns = 9\n")
    with pytest.raises(ConfigError) as err:
        load_config(f, environ={"MIDDLE_AGENT_MAX_TURNS": "many"})
    assert "environment variable MIDDLE_AGENT_MAX_TURNS" in str(err.value)
    assert str(f.resolve()) not in str(err.value)


def test_a_misspelt_variable_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="MIDDLE_AGNET_MAX_TURNS names no setting"):
        load_config(environ={"MIDDLE_AGNET_MAX_TURNS": "3"})


def test_old_worker_keys_say_where_they_moved(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[coding_agent]\nkind = "claude-code"\npermission_mode = "acceptEdits"\n')
    with pytest.raises(ConfigError, match=r"belong under \[coding_agent.options\]"):
        load_config(f, environ={})


def test_the_worker_section_of_before_says_its_new_name(tmp_path):
    """"worker" means a fleet machine (`middle worker`); the coding agent's section is [coding_agent]."""
    f = tmp_path / "middle.toml"
    old = "[" + "worker]"  # (the old header, as an old middle.toml has it; spelt so no rename touches it)
    f.write_text(f'{old}\nkind = "claude-code"\n[coding_agent.options]\nturn_timeout_s = 60\n')
    with pytest.raises(ConfigError, match=r"\[worker\] section is now called \[coding_agent\]"):
        load_config(f, environ={})
    with pytest.raises(ConfigError, match="set MIDDLE_CODING_AGENT_OPTIONS instead"):
        load_config(environ={"MIDDLE_" + "WORKER_OPTIONS": "{}"})


@pytest.mark.parametrize("value, says", [("[1]", "must be a JSON object"), ("{nope", "is not JSON")])
def test_coding_agent_variables(tmp_path, value, says):
    f = tmp_path / "middle.toml"
    f.write_text('[coding_agent.options]\nturn_timeout_s = 60\n')
    cfg = load_config(f, environ={"MIDDLE_CODING_AGENT_KIND": "claude-code",
                                  "MIDDLE_CODING_AGENT_OPTIONS": '{"max_turns": 3}'})
    assert cfg.coding_agent.kind == "claude-code"
    assert cfg.coding_agent.options == {"turn_timeout_s": 60, "max_turns": 3}
    with pytest.raises(ConfigError, match=says):
        load_config(f, environ={"MIDDLE_CODING_AGENT_OPTIONS": value})
    with pytest.raises(ConfigError, match="names no setting of \\[coding_agent\\]"):
        load_config(f, environ={"MIDDLE_CODING_AGENT_OPTION": "{}"})


def test_coding_agent_options_are_validated_by_its_kind(tmp_path):
    from orchestrator.plugins.manager import PluginRegistry

    reg = PluginRegistry(load_entry_points=False)
    opts = reg.coding_agent_options("claude-code", {"extra_args": ["--foo"], "turn_timeout_s": 5})
    assert opts.extra_args == ["--foo"] and opts.turn_timeout_s == 5
    with pytest.raises(ConfigError, match="coding_agent.options.*permision_mode"):
        reg.coding_agent_options("claude-code", {"permision_mode": "x"})


def test_a_store_url_that_is_not_postgresql_is_refused_instead_of_naming_a_sqlite_file(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[store]\nurl = "mysql://db.internal/middle"\n')
    with pytest.raises(ConfigError) as err:
        load_config(f, environ={})
    message = str(err.value)
    assert "store.url: 'mysql' is not a PostgreSQL URL" in message and str(f.resolve()) in message
    assert "Value error" not in message
    f.write_text("")
    with pytest.raises(ConfigError, match="MIDDLE_STORE_URL"):
        load_config(f, environ={"MIDDLE_STORE_URL": "sqlite:///x.db"})
    assert load_config(f, environ={"MIDDLE_STORE_URL": "postgresql://u@h/db"}).store.url == "postgresql://u@h/db"


def test_the_check_and_worktree_settings_come_from_the_environment_too(tmp_path):
    f = tmp_path / "middle.toml"
    f.write_text('[check]\ncommands = ["pytest -q"]\n')
    cfg = load_config(
        f,
        environ={
            "MIDDLE_CHECK_COMMANDS": '["npm test", "npm run lint"]',
            "MIDDLE_CHECK_TIMEOUT_S": "60",
            "MIDDLE_CHECK_MAX_ROUNDS": "1",
            "MIDDLE_WORKTREE_COPY": '[".env"]',
            "MIDDLE_WORKTREE_SETUP": '["npm ci"]',
        },
    )
    assert cfg.check.commands == ["npm test", "npm run lint"] and (cfg.check.timeout_s, cfg.check.max_rounds) == (60, 1)
    assert cfg.worktree.copy_paths == [".env"] and cfg.worktree.setup == ["npm ci"]
    with pytest.raises(ConfigError, match="a check command is empty"):
        load_config(f, environ={"MIDDLE_CHECK_COMMANDS": '["  "]'})
