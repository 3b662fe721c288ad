"""`middle --help`, `middle tickets` and `middle log` start without the slow imports.

Their start-up is a benchmark (README, "Start-up"), never asserted as a time; what is asserted is
the cause: once the memos are warm (config_memo, the ticket folder's parsed files, plugin_index),
these commands import no pydantic, YAML, importlib.metadata, OpenSSL (hashlib) or logging, in a
fresh process, as a user's second command would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SLOW = ("pydantic", "yaml", "importlib.metadata", "_hashlib", "logging", "orchestrator.config.settings",
        "fastapi", "numpy", "langgraph")

PROBE = """
import sys
from orchestrator.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("LOADED", sorted(m for m in {slow!r} if m in sys.modules), file=sys.stderr)
sys.exit(code)
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "tickets").mkdir(parents=True)
    (project / "middle.toml").write_text('[project]\nid = "proj"\n')
    ticket = project / "tickets" / "t1.md"
    ticket.write_text("---\ntitle: Add a hello module\nproject: proj\n---\nWrite hello.py.\n")
    old = 1_600_000_000  # older than the memo's "racily clean" window, so it is remembered
    os.utime(ticket, (old, old))
    return project


def _middle(project: Path, cache: Path, *args: str, env: dict[str, str] | None = None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MIDDLE_")}
    environ.update({"MIDDLE_AGENT_CACHE_DIR": str(cache), **(env or {})})
    result = subprocess.run([sys.executable, "-c", PROBE.format(slow=SLOW), *args], cwd=project,
                            capture_output=True, text=True, env=environ, timeout=120)
    loaded = [line for line in result.stderr.splitlines() if line.startswith("LOADED ")]
    assert loaded, result.stderr
    return result, loaded[-1].removeprefix("LOADED ")


@pytest.mark.parametrize("args", [["tickets"], ["log", "t1"], ["--help"]])
def test_a_second_run_imports_none_of_the_slow_modules(tmp_path, args):
    project, cache = _project(tmp_path), tmp_path / "cache"
    if args[0] == "log":
        from tickets.source import load_ticket_file
        from tickets.store import TicketStore

        with TicketStore(project / ".middle" / "middle.sqlite3") as store:
            store.upsert_ticket(load_ticket_file(project / "tickets" / "t1.md", project))
    first, _ = _middle(project, cache, *args)
    assert first.returncode == 0, first.stderr
    second, loaded = _middle(project, cache, *args)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout  # the same answer, from the memos
    assert loaded == "[]", f"middle {' '.join(args)} imported {loaded}"
    if args[0] == "tickets":
        assert "Add a hello module" in second.stdout


def test_the_first_run_validates_the_config_in_full(tmp_path):
    """The memo is only a shortcut: a cold start imports the pydantic config as every command does."""
    project, cache = _project(tmp_path), tmp_path / "cache"
    _, loaded = _middle(project, cache, "tickets")
    assert "pydantic" in loaded and "orchestrator.config.settings" in loaded


def test_an_edited_config_is_validated_again_and_its_error_reported(tmp_path):
    project, cache = _project(tmp_path), tmp_path / "cache"
    assert _middle(project, cache, "tickets")[0].returncode == 0
    (project / "middle.toml").write_text('[project]\nid = "proj"\ntickets_dri = "x"\n')
    result, _ = _middle(project, cache, "tickets")
    assert result.returncode == 1
    assert "tickets_dri" in result.stderr and "Traceback" not in result.stderr


def test_an_environment_override_is_not_served_from_the_memo(tmp_path):
    project, cache = _project(tmp_path), tmp_path / "cache"
    assert _middle(project, cache, "tickets")[0].returncode == 0
    (project / "other").mkdir()
    result, loaded = _middle(project, cache, "tickets", env={"MIDDLE_PROJECT_TICKETS_DIR": "other"})
    assert result.returncode == 0, result.stderr
    assert "Add a hello module" not in result.stdout  # the other (empty) folder was listed
    assert "pydantic" in loaded  # validated again, with the variable


def test_a_ticket_file_edited_since_is_read_again(tmp_path):
    project, cache = _project(tmp_path), tmp_path / "cache"
    assert "Add a hello module" in _middle(project, cache, "tickets")[0].stdout
    ticket = project / "tickets" / "t1.md"
    ticket.write_text("---\ntitle: Add a howdy module\nproject: proj\n---\nWrite hello.py.\n")  # same size
    result, loaded = _middle(project, cache, "tickets")
    assert "Add a howdy module" in result.stdout
    assert "yaml" in loaded
