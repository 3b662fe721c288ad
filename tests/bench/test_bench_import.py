"""`middle bench import`: a built N-commit repository imported through the real facade and git."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner

from orchestrator.bench.git_history import build_repo
from orchestrator.bench.ticket_data import HistoryTicket
from orchestrator.cli.main import main

TICKETS = [HistoryTicket("1", "", "Add CSV export", "Users asked for it.", ["src/export.py"]),
           HistoryTicket("2", "", "Fix login redirect", "", ["src/login.py", "tests/test_login.py"])]


def test_the_built_repository_cycles_the_tickets_with_a_round_number(tmp_path):
    repo = build_repo(tmp_path / "repo", TICKETS, 5)
    log = subprocess.run(["git", "-C", str(repo), "log", "--reverse", "--format=%s|%b|%at",
                          "--name-only"], capture_output=True, text=True, check=True).stdout
    subjects = [line.split("|")[0] for line in log.splitlines() if "|" in line]
    assert subjects == ["Add CSV export", "Fix login redirect", "Add CSV export (round 2)",
                        "Fix login redirect (round 2)", "Add CSV export (round 3)"]
    assert "Users asked for it." in log and "tests/test_login.py" in log


def test_cli_imports_every_commit_then_nothing_on_the_rerun(tmp_path):
    data = tmp_path / "history.json"
    data.write_text(json.dumps({"name": "t", "tickets": [
        {"id": t.id, "date": "", "title": t.title, "description": t.description,
         "files": [{"path": p} for p in t.paths], "refs": []} for t in TICKETS]}))
    out = CliRunner().invoke(main, ["bench", "import", "--commits", "7", "--dataset", str(data),
                                    "--backend", "hybrid:embedder=hashing", "--backend", "bm25",
                                    "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["results"]
    assert [(r["backend"], r["commits"], r["added"], r["rerun_added"]) for r in rows] == [
        ("hybrid:embedder=hashing", 7, 7, 0), ("bm25", 7, 7, 0)]
    assert all(r["wall_s"] > 0 and r["commits_per_s"] > 0 for r in rows)
