"""What a new user hits in the first week: no config, read-only commands, bad paths, odd text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.memory.facade import doc_id
from orchestrator.testing import make_repo


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    return tmp_path


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def project(root: Path, memory: bool = True) -> None:
    mem = '[memory]\nsave_dir = ".middle/memory"\nbackend = "sliding_window"\n' if memory else ""
    (root / "middle.toml").write_text(f'[project]\nid = "demo"\npath = "repo"\n{mem}')


def ticket(root: Path, tid: str, title: str, body: str = "Do it.") -> None:
    (root / "tickets" / f"{tid}.md").write_text(f"---\ntitle: {title}\nproject: demo\n---\n{body}\n")


def one_error_line(result, *needles: str) -> None:
    assert result.exit_code != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args", [["tickets"], ["run"], ["log", "x"], ["memory", "list"], ["resume", "x"]])
def test_without_a_config_file_commands_say_how_to_make_one(workdir, args):
    (workdir / "middle.toml").unlink(missing_ok=True)
    one_error_line(invoke(*args), "no middle.toml", "middle init")
    assert not (workdir / ".middle").exists()


def test_read_only_commands_create_no_files(workdir):
    project(workdir)
    ticket(workdir, "t1", "First")
    before = sorted(p.relative_to(workdir) for p in workdir.rglob("*"))
    assert invoke("tickets").exit_code == 0
    assert invoke("memory", "list").exit_code == 0
    assert invoke("memory", "search", "anything").exit_code == 0
    invoke("log", "t1")
    assert sorted(p.relative_to(workdir) for p in workdir.rglob("*")) == before


def test_tickets_shows_the_folder_before_any_run_with_ellipsis_for_long_cells(workdir, monkeypatch):
    from orchestrator.cli import output as cli_output
    monkeypatch.setattr(cli_output.console, "width", 120)
    project(workdir)
    ticket(workdir, "t1", "A title that is long " * 5)
    out = invoke("tickets").stdout
    assert "t1" in out and "pending" in out
    assert "…" in out and "A title that is long A title" in out


def test_terminal_control_characters_in_stored_text_are_escaped(workdir):
    project(workdir)
    ticket(workdir, "t1", '"Evil \\e]0;pwned\\a title"')  # YAML escapes for ESC and BEL
    assert invoke("memory", "add", "doc with \x1b[2J clear screen").exit_code == 0
    listing = invoke("tickets").stdout + invoke("memory", "list").stdout
    assert "\x1b" not in listing and "\x07" not in listing
    assert "\\x1b" in listing and "\\x07" in listing


def test_revert_of_a_ticket_that_never_ran_is_refused(workdir):
    project(workdir)
    ticket(workdir, "t1", "First")
    from orchestrator.config.settings import load_config
    from orchestrator.services import Services
    from tickets.source import load_tickets

    with Services(load_config(environ={})) as svc:  # the ticket is known to the store, never run
        for t in load_tickets(workdir / "tickets", workdir / "repo").tickets:
            svc.store.upsert_ticket(t)
    one_error_line(invoke("revert", "t1"), "never run")


def test_memory_delete_of_a_missing_doc_and_export_to_a_missing_dir(workdir):
    project(workdir)
    assert invoke("memory", "add", "kept doc").exit_code == 0
    one_error_line(invoke("memory", "delete", "not there"), "middle memory list")
    one_error_line(invoke("memory", "export", "-o", "/missing/dir/x.json"), "/missing/dir/x.json")
    assert invoke("memory", "list").stdout.strip() == f"{doc_id('kept doc')[:8]}  kept doc"


def test_search_says_when_the_backend_recalls_by_recency(workdir):
    project(workdir)
    invoke("memory", "add", "one")
    result = invoke("memory", "search", "unrelated")
    assert "recalls by recency" in result.stderr
    assert "by recency" in invoke("backends").stdout


def test_init_checks_the_backend_writes_gitignore_and_never_overwrites(workdir):
    one_error_line(invoke("init", "--backend", "nope"), "unknown memory backend 'nope'")
    assert not (workdir / "middle.toml").exists()
    out = invoke("init").stdout
    assert "wrote" in out and ".middle/" in (workdir / ".gitignore").read_text()
    again = invoke("init", "--backend", "none").stdout
    assert "left" in again and "unchanged" in again
    assert 'backend = "hybrid"' in (workdir / "middle.toml").read_text()
    assert (workdir / ".gitignore").read_text().count(".middle/") == 1


def test_init_with_config_writes_that_file(workdir):
    target = workdir / "sub" / "my.toml"
    target.parent.mkdir()
    assert invoke("--config", str(target), "init").exit_code == 0
    assert target.exists() and (target.parent / "tickets" / "hello.md").exists()
    assert not (workdir / "middle.toml").exists()


def test_init_where_nothing_can_be_written(workdir):
    one_error_line(invoke("--config", "/proc/middle.toml", "init"), "cannot write /proc/middle.toml")


@pytest.mark.parametrize("name, made", [("tickets", "file"), (".gitignore", "folder")])
def test_init_where_its_folder_or_file_is_the_other_kind_writes_nothing(workdir, name, made):
    """A file named tickets (or a folder named .gitignore): named, and refused before any file
    is written (it wrote middle.toml first, then failed with 'cannot write in DIR (File exists)')."""
    blocker = workdir / name
    if blocker.is_dir():
        blocker.rmdir()  # the fixture's empty tickets/ folder
    if made == "folder":
        blocker.mkdir()
    else:
        blocker.write_text("x\n")
    one_error_line(invoke("init"), f"{blocker} is a {made}, and `middle init` needs a")
    assert not (workdir / "middle.toml").exists()


def test_a_corrupt_ticket_database_is_one_error_line_naming_it(workdir):
    project(workdir)
    db = workdir / ".middle" / "middle.sqlite3"
    db.parent.mkdir()
    db.write_bytes(b"not a database at all" * 200)
    one_error_line(invoke("tickets"), str(db))
    one_error_line(invoke("log", "t1"), str(db))


def test_piped_output_is_not_wrapped_at_80_columns(workdir):
    project(workdir)
    doc = "word " * 60 + "END"
    invoke("memory", "add", doc)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run([sys.executable, "-m", "orchestrator.cli.main", "memory", "list"], cwd=workdir,
                         env=env, capture_output=True, text=True, check=True).stdout
    assert f"{doc_id(doc)[:8]}  {doc}" in out.splitlines()


def test_ctrl_c_in_a_command_says_interrupted_not_aborted(tmp_path):
    """Ctrl-C while `middle memory edit` waits for the editor (the editor's process group gets
    the SIGINT, as a terminal sends it): one `interrupted:` line and exit 130, the doc unchanged."""
    import os
    import subprocess
    import sys

    from orchestrator.testing import make_repo

    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text('[project]\nid = "demo"\npath = "repo"\n[memory]\n'
                                          'save_dir = ".middle/memory"\nbackend = "bm25"\n')
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nkill -INT 0\nsleep 5\n")  # Ctrl-C: the whole foreground group
    editor.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MIDDLE_CONFIG", "MEMORY_SAVE_DIR")}
    env.update(MIDDLE_AGENT_CACHE_DIR=str(tmp_path / "cache"), EDITOR=str(editor), VISUAL=str(editor))
    middle = [sys.executable, "-m", "orchestrator.cli.main", "memory"]
    subprocess.run([*middle, "add", "we use tabs"], cwd=tmp_path, env=env, check=True, capture_output=True)
    ident = subprocess.run([*middle, "list"], cwd=tmp_path, env=env, check=True, capture_output=True,
                           text=True).stdout.split()[0]
    proc = subprocess.run([*middle, "edit", ident], cwd=tmp_path, env=env, capture_output=True, text=True,
                          start_new_session=True, timeout=60)  # its own group: the SIGINT stays there
    assert proc.returncode == 130 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["interrupted: stopped by Ctrl-C"], proc.stderr
    assert "we use tabs" in subprocess.run([*middle, "list"], cwd=tmp_path, env=env, capture_output=True,
                                           text=True).stdout
