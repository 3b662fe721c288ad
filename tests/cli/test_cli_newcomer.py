"""Edges a new user trips on: config from a subfolder, init in an existing project, oversized
tickets, bad option values found at load, `middle backends`, the demo's files, packaging."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing import make_repo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    (tmp_path / "middle.toml").write_text('[project]\nid = "demo"\npath = "repo"\n')
    return tmp_path


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def test_the_config_is_found_from_a_subfolder(workdir, monkeypatch):
    (workdir / "tickets" / "a.md").write_text("---\ntitle: A\nproject: demo\n---\nx\n")
    monkeypatch.chdir(workdir / "repo")
    result = invoke("tickets")
    assert result.exit_code == 0 and "pending" in result.stdout


def test_init_in_a_subfolder_of_a_project_refuses_to_nest_one(workdir, monkeypatch):
    (workdir / "repo" / "sub").mkdir()
    monkeypatch.chdir(workdir / "repo" / "sub")
    result = invoke("init")
    assert result.exit_code == 1 and "already makes this folder part of a project" in result.output
    assert not (workdir / "repo" / "sub" / "middle.toml").exists()


def test_no_config_anywhere_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIDDLE_CONFIG", raising=False)
    result = invoke("tickets")
    assert result.exit_code == 1 and "or any folder above it" in result.output


def test_init_in_an_existing_project_adds_no_example_ticket(workdir):
    (workdir / "tickets" / "real.md").write_text("---\ntitle: Real work\nproject: demo\n---\nx\n")
    result = invoke("init")
    assert result.exit_code == 0
    assert not (workdir / "tickets" / "hello.md").exists()
    assert "--backend was not applied" not in result.output and "added no example ticket" in result.output
    assert "--backend was not applied" in invoke("init", "--backend", "bm25").output


def test_init_in_a_new_git_repository_records_its_branch(tmp_path, monkeypatch):
    make_repo(tmp_path, branch="trunk")
    monkeypatch.chdir(tmp_path)
    assert invoke("init").exit_code == 0
    config = tomllib.loads((tmp_path / "middle.toml").read_text())
    assert config["project"]["base_branch"] == "trunk" and config["memory"]["backend"] == "hybrid"
    assert (tmp_path / "tickets" / "hello.md").exists()


def test_init_says_what_git_needs_before_a_ticket_can_run(tmp_path, monkeypatch):
    """Outside a repository, or in one with no commit, `middle init` still writes its files and
    says what to do before `middle run` (each ticket branches from a commit)."""
    import subprocess

    monkeypatch.chdir(tmp_path)
    outside = invoke("init")
    assert outside.exit_code == 0 and (tmp_path / "middle.toml").exists()
    text = " ".join(outside.output.split())
    assert "is not a git repository" in text and "git init" in text and 'isolation = "none"' in text
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    empty = " ".join(invoke("init").output.split())
    assert "has no commit yet" in empty and "git commit" in empty
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", "--allow-empty"],
                   cwd=tmp_path, check=True)
    assert "note:" not in invoke("init").output


INIT_PROJECTS = {
    "pytest.ini": ({"pytest.ini": "[pytest]\n"}, ["python -m pytest -q"]),
    "pyproject": ({"pyproject.toml": "[project]\nname = 'x'\n\n[tool.pytest.ini_options]\naddopts = '-q'\n"},
                  ["python -m pytest -q"]),
    "tests dir": ({"tests/unit/test_calc.py": "def test_x():\n    pass\n"}, ["python -m pytest -q"]),
    "npm": ({"package.json": '{"name": "x", "scripts": {"test": "node --test"}}'}, ["npm test"]),
    "pnpm": ({"package.json": '{"scripts": {"test": "jest"}}', "pnpm-lock.yaml": ""}, ["pnpm test"]),
    "yarn": ({"package.json": '{"scripts": {"test": "jest"}}', "yarn.lock": ""}, ["yarn test"]),
    "rspec": ({"spec/models/user_spec.rb": ""}, ["rspec"]),
    "rspec with bundler": ({".rspec": "--require spec_helper\n", "Gemfile": ""}, ["bundle exec rspec"]),
    "go and cargo": ({"go.mod": "module x\n", "Cargo.toml": "[package]\nname = 'x'\n"},
                     ["go test ./...", "cargo test"]),
    # where no runner shows, the project's wrapper (read through the runners behind it)
    "make": ({"Makefile": "CC := cc\n\ntest: build\n\t./run-tests\n"}, ["make test"]),
    "tox": ({"tox.ini": "[tox]\nenvlist = py311\n"}, ["tox"]),
    "nox": ({"noxfile.py": "import nox\n"}, ["nox"]),
    "pytest and tox": ({"pytest.ini": "[pytest]\n", "tox.ini": "[tox]\n"}, ["python -m pytest -q"]),
    # npm's own placeholder script, a tests folder without tests, a pyproject without pytest, a
    # Makefile without a test target: nothing
    "nothing": ({"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}',
                 "tests/helpers.py": "", "pyproject.toml": "[project]\nname = 'x'\n",
                 "Makefile": "test := unit\nbuild:\n\tcc x.c\n"}, []),
}


@pytest.mark.parametrize("name", list(INIT_PROJECTS))
def test_init_writes_a_commented_check_with_the_runner_it_finds(tmp_path, monkeypatch, name):
    files, commands = INIT_PROJECTS[name]
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIDDLE_CONFIG", raising=False)
    result = invoke("init")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "middle.toml").read_text()
    assert "check" not in tomllib.loads(text)  # commented out: a person confirms it first
    uncommented = tomllib.loads(re.sub(r"^# (\[check\]|commands =|max_rounds =)", r"\1", text, flags=re.M))
    if commands:
        assert uncommented["check"]["commands"] == commands
        assert all(f"`{c}`" in " ".join(result.output.split()) for c in commands)
    else:  # the example, naming what to do
        assert uncommented["check"]["commands"] == ["python -m pytest -q"] and "no test runner found" in text
        assert "[check]" not in result.output
    from orchestrator.config.settings import CheckConfig

    CheckConfig.model_validate(uncommented["check"])  # what it suggests is a valid [check]


def test_an_oversized_ticket_is_refused_at_load_naming_the_file(workdir):
    (workdir / "tickets" / "huge.md").write_text("---\ntitle: Huge\nproject: demo\n---\n" + "x" * 150_000)
    (workdir / "tickets" / "ok.md").write_text("---\ntitle: Fine\nproject: demo\n---\nx\n")
    result = invoke("tickets")
    assert "huge.md" in result.stderr and "max_ticket_chars" in result.stderr and "150,0" in result.stderr
    assert "ok" in result.stdout and "huge" not in result.stdout


def test_a_bad_permission_mode_fails_before_anything_runs(workdir, monkeypatch):
    (workdir / "middle.toml").write_text('[project]\npath = "repo"\n[coding_agent.options]\npermission_mode = "yolo"\n')
    (workdir / "tickets" / "a.md").write_text("---\ntitle: A\nproject: demo\n---\nx\n")
    result = invoke("run", "--fake")
    assert result.exit_code == 1 and "'yolo' is not a Claude Code permission mode" in result.output
    from tickets.store import TicketStore

    db = workdir / ".middle" / "middle.sqlite3"
    if db.exists():
        with TicketStore(db) as store:
            assert all(store.latest_run(t.id) is None for t in store.list_tickets())


def test_backends_marks_the_default_and_shows_one_backends_options():
    listing = invoke("backends").stdout
    assert re.search(r"hybrid \(default\)", listing)
    none_row = next(line for line in listing.splitlines() if line.lstrip("│ ").startswith("none"))
    assert "memory off" in none_row and "by relevance" not in none_row
    detail = invoke("backends", "sliding_window").stdout
    assert "window_size" in detail and "14" in detail and "[memory.options]" in detail
    assert invoke("backends", "nosuch").exit_code == 1


def test_every_builtin_backend_has_an_example_config():
    from orchestrator.plugins.manager import PluginRegistry

    builtin = {n for n, r in PluginRegistry(load_entry_points=False).backends.items()}
    assert builtin == {p.stem for p in (ROOT / "examples" / "configs").glob("*.toml")}


def test_the_wheel_installs_every_example_file():
    """`middle demo` outside a clone reads the examples the wheel installs (data-files)."""
    import glob

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = [p for files in pyproject["tool"]["setuptools"]["data-files"].values() for p in files]
    packaged = {Path(f) for p in patterns for f in glob.glob(str(ROOT / p))}
    wanted = {p for p in (ROOT / "examples").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert wanted and wanted <= packaged


@pytest.mark.cli
@pytest.mark.slow
def test_the_demo_leaves_nothing_in_the_temp_folder(tmp_path, claude_cli):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "MIDDLE_", "CLAUDE_"))}
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    middle = Path(sys.executable).with_name("middle")
    proc = subprocess.run([str(middle), "demo", "--no-memory"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "middle demo --dir DIR" in proc.stdout
    # (Claude Code keeps its own per-user folders there, e.g. claude-0/; nothing of ours is left)
    assert [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("middle")] == []


@pytest.mark.parametrize("backend", ["hybrid", "dense", "hipporag", "hindsight"])
def test_a_bad_embedder_is_an_error_at_load_not_after_the_first_paid_call(workdir, backend):
    (workdir / "middle.toml").write_text(
        f'[project]\npath = "repo"\n[memory]\nsave_dir = "mem"\nbackend = "{backend}"\n'
        '[memory.options]\nembedder = "nope"\n')
    (workdir / "tickets" / "a.md").write_text("---\ntitle: A\nproject: demo\n---\nx\n")
    for args in (("memory", "list"), ("run", "--fake")):
        result = invoke(*args)
        assert result.exit_code == 1 and "unknown embedder 'nope'" in result.output, (args, result.output)
    assert not (workdir / "mem").exists() and not (workdir / ".middle" / "middle.sqlite3").exists()


def test_a_separate_repository_inside_a_project_is_a_project_of_its_own(workdir, monkeypatch):
    """A clone inside another project's folder: `middle run` there must not run the outer
    project's tickets, and `middle init` starts a project there (git sees two repositories)."""
    (workdir / "tickets" / "outer.md").write_text("---\ntitle: Outer work\nproject: demo\n---\nx\n")
    inner = make_repo(workdir / "repo" / "vendor" / "lib")
    monkeypatch.chdir(inner)
    result = invoke("tickets")
    assert result.exit_code == 1 and "no middle.toml in" in result.output and "outer" not in result.output
    assert invoke("init").exit_code == 0 and (inner / "middle.toml").is_file()
    assert "outer" not in invoke("tickets").output


def test_a_config_beside_the_repository_it_drives_is_found_from_its_worktrees(workdir, monkeypatch):
    """The config's [project] path names the repository: found from inside it, and from a
    ticket's worktree (whose .git is a file, not a separate repository)."""
    (workdir / "tickets" / "a.md").write_text("---\ntitle: A\nproject: demo\n---\nx\n")
    subprocess.run(["git", "-C", str(workdir / "repo"), "worktree", "add", "-q", "-b", "w",
                    str(workdir / "repo" / "wt")], check=True)
    for folder in (workdir / "repo", workdir / "repo" / "wt"):
        monkeypatch.chdir(folder)
        result = invoke("tickets")
        assert result.exit_code == 0 and "pending" in result.stdout


def test_a_ticket_written_by_hand_after_init_needs_no_project_line(tmp_path, monkeypatch):
    """init names the project ([project] id, from the folder's name made a safe id, even with
    spaces and accents), so the user's first own ticket, without `project:`, loads."""
    root = make_repo(tmp_path / "mon projet café")
    monkeypatch.chdir(root)
    assert invoke("init").exit_code == 0
    assert tomllib.loads((root / "middle.toml").read_text())["project"]["id"] == "mon-projet-caf-"
    (root / "tickets" / "mine.md").write_text("---\ntitle: My own\n---\nDo it.\n")
    result = invoke("tickets")
    assert result.exit_code == 0 and "error" not in result.output and "missing 'project'" not in result.output
    assert "mine" in result.stdout and "hello" in result.stdout


def test_a_bare_repository_is_named_and_the_clone_advised(tmp_path, monkeypatch):
    """`middle init` in a bare repository writes nothing (its files could never be committed),
    and a run there says to clone it, not to `git init` (it is a repository already)."""
    source = make_repo(tmp_path / "src")
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    monkeypatch.chdir(bare)
    monkeypatch.delenv("MIDDLE_CONFIG", raising=False)
    result = invoke("init")
    assert result.exit_code == 1 and "is a bare git repository" in result.output and "git clone" in result.output
    assert not (bare / "middle.toml").exists() and not (bare / "tickets").exists()
    (bare / "middle.toml").write_text('[project]\nid = "b"\npath = "."\n')
    (bare / "tickets").mkdir()
    (bare / "tickets" / "a.md").write_text("---\ntitle: A\n---\nx\n")
    result = invoke("run", "--fake")
    assert result.exit_code != 0 and "is a bare git repository" in result.output and "git init" not in result.output
