"""`middle memory import`: git history (incremental, idempotent) and notes or Claude Code
transcripts, through the real CLI on real git repositories and a real store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from memory_cli_helpers import middle

from orchestrator.config.settings import load_config
from orchestrator.memory.importers import git as git_import
from orchestrator.services import Services
from orchestrator.testing import make_repo
from orchestrator.workspace.git import author_args, git


@pytest.fixture
def root(tmp_path):
    make_repo(tmp_path / "repo")
    (tmp_path / "middle.toml").write_text(
        '[project]\nid = "demo"\npath = "repo"\n[memory]\nsave_dir = ".middle/memory"\n'
        'backend = "hybrid"\n[memory.options]\nembedder = "hashing"\n')
    return tmp_path


def change(repo: Path, name: str, subject: str, body: str = "", when: int | None = None) -> str:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(subject + "\n")
    git(repo, "add", "-A")
    env = {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"} if when else {}
    message = ["-m", subject] + (["-m", body] if body else [])
    subprocess.run(["git", "-C", str(repo), *author_args(repo), "commit", "-q", "--no-verify", *message],
                   check=True, env={**os.environ, **env})
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def docs(root: Path) -> list[str]:
    return json.loads(middle(root, "export").stdout)["docs"]


def records(root: Path) -> dict[str, float]:
    config = load_config(str(root / "middle.toml"))
    with Services(config) as svc:
        assert svc.memory is not None
        with svc.memory.using("demo", "test") as backend:
            return dict(backend.list_records())


def error_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


def test_git_history_is_imported_once_with_dates_then_only_new_commits(root):
    repo = root / "repo"
    change(repo, "src/cache.py", "Cache sessions in Redis", "We chose Redis over memcached: it persists.",
           when=1_600_000_000)
    # A merged side branch: its commit is imported, the merge commit itself is not.
    git(repo, "checkout", "-q", "-b", "side")
    change(repo, "docs/adr.md", "ADR: tabs for indentation", when=1_600_100_000)
    git(repo, "checkout", "-q", "main")
    change(repo, "src/login.py", "Login form validates emails", when=1_600_200_000)
    git(repo, *author_args(repo), "merge", "-q", "--no-ff", "-m", "Merge side", "side")

    first = middle(root, "import", "git", "--no-progress")
    assert "imported 4 new commit(s)" in first.stdout  # initial, cache, adr, login
    stored = docs(root)
    assert len(stored) == 4 and not any("Merge side" in d for d in stored)
    cache = next(d for d in stored if "Cache sessions" in d)
    assert cache.startswith("Commit ") and "(2020-09-13, " in cache
    assert "We chose Redis over memcached: it persists." in cache and cache.endswith("Changed: src/cache.py")
    assert records(root)[cache] == 1_600_000_000  # the commit's own date, not the import's

    again = middle(root, "import", "git", "--no-progress")
    assert "nothing new to import" in again.stdout and len(docs(root)) == 4
    change(repo, "src/retry.py", "Retry uploads three times")
    third = middle(root, "import", "git", "--no-progress")
    assert "imported 1 new commit(s)" in third.stdout
    assert len(docs(root)) == 5 and any("Retry uploads" in d for d in docs(root))
    record = json.loads((root / ".middle" / "imports" / "demo.json").read_text())
    assert record["git"][str(repo.resolve())]["last"] == git(repo, "rev-parse", "HEAD").stdout.strip()


def test_since_imports_only_the_later_commits(root):
    repo = root / "repo"
    old = change(repo, "a.py", "Old work")
    change(repo, "b.py", "New work")
    out = middle(root, "import", "git", "--since", old[:10], "--no-progress")
    assert "imported 1 new commit(s)" in out.stdout
    assert [d.split("): ", 1)[1] for d in docs(root)] == ["New work\nChanged: b.py"]


def test_a_failed_batch_says_how_many_went_in_and_a_rerun_continues(root, monkeypatch):
    import orchestrator.memory.importers as importers

    repo = root / "repo"
    for i in range(5):
        change(repo, f"f{i}.py", f"Change {i}")
    config = load_config(str(root / "middle.toml"))
    monkeypatch.setattr(importers, "BATCH", 2)
    with Services(config) as svc:
        memory = svc.memory
        real = memory.index_new_records
        calls = []

        def failing(project_id, batch):  # the store fails on the third batch
            calls.append(len(batch))
            if len(calls) == 3:
                raise importers.MemoryStoreError("memory import failed: disk full")
            return real(project_id, batch)

        monkeypatch.setattr(memory, "index_new_records", failing)
        with pytest.raises(importers.MemoryStoreError, match="4 doc\\(s\\) were imported before this "
                                                             "error; run the same import again"):
            git_import.import_history(memory, "demo", repo, config.state_path, None,
                                      lambda _d, _t: (lambda _n: None))
        monkeypatch.setattr(memory, "index_new_records", real)
        report, total = git_import.import_history(memory, "demo", repo, config.state_path, None,
                                                  lambda _d, _t: (lambda _n: None))
    assert (report.added, total) == (2, 2)  # only what the failed run had not indexed
    assert len(docs(root)) == 6 and len(set(docs(root))) == 6


def test_git_import_errors_are_one_line(root, tmp_path):
    assert "names no commit" in error_line(middle(root, "import", "git", "--since", "nope", ok=False))
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "is not a git repository" in error_line(
        middle(root, "import", "git", "--repo", str(plain), ok=False))
    middle(root, "import", "git", "--no-progress")
    record = root / ".middle" / "imports" / "demo.json"
    record.write_text("{not json")
    line = error_line(middle(root, "import", "git", ok=False))
    assert str(record) in line and "delete it" in line


NOTES = """# Decisions

## Caching
We cache sessions in Redis.

```bash
# not a heading: a comment in code
redis-cli ping
```

## Indentation
Tabs, never spaces.
"""


def transcript(path: Path, lines: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_notes_and_claude_code_sessions_are_imported_once(root):
    (root / "notes.md").write_text(NOTES)
    (root / "plain.txt").write_text("Deploys happen on Tuesdays.\n")
    sessions = root / "sessions"
    sessions.mkdir()
    transcript(sessions / "abc.jsonl", [
        {"type": "summary", "summary": "x"},
        {"type": "user", "sessionId": "abc", "timestamp": "2025-03-04T10:00:00Z",
         "message": {"role": "user", "content": "Why does login fail for long emails?"}},
        {"type": "assistant", "timestamp": "2025-03-04T10:00:05Z", "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "The column is VARCHAR(64)."},
            {"type": "tool_use", "name": "Read", "input": {}}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}},
        {"type": "user", "isMeta": True, "message": {"role": "user", "content": "<command-name>/clear"}},
    ])
    out = middle(root, "import", "notes.md", "plain.txt", "sessions", "--no-progress")
    assert "imported 4 new doc(s) from 3 file(s)" in out.stdout
    stored = docs(root)
    assert "notes.md > Decisions > Caching\nWe cache sessions in Redis.\n\n```bash\n# not a heading" in stored[0]
    assert stored[1] == "notes.md > Decisions > Indentation\nTabs, never spaces."
    assert stored[2] == "plain.txt\nDeploys happen on Tuesdays."
    assert stored[3] == ("Claude Code session abc (2025-03-04):\nUser: Why does login fail for long "
                         "emails?\nAssistant: The column is VARCHAR(64).")
    assert records(root)[stored[3]] == 1_741_082_400  # the session's first message
    again = middle(root, "import", "notes.md", "plain.txt", "sessions", "--no-progress")
    assert "imported 0 new doc(s)" in again.stdout and "4 already there" in again.stdout


def test_bad_input_is_one_error_line_and_imports_nothing(root):
    (root / "notes.md").write_text(NOTES)
    transcript(root / "broken.jsonl", [{"type": "user", "message": {"role": "user", "content": "hi"}}])
    with (root / "broken.jsonl").open("a") as f:
        f.write("{truncated\n")
    line = error_line(middle(root, "import", "notes.md", "broken.jsonl", ok=False))
    assert "broken.jsonl line 2 is not JSON" in line
    (root / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    assert "is not UTF-8 text" in error_line(middle(root, "import", "notes.md", "blob.bin", ok=False))
    assert "does not exist" in error_line(middle(root, "import", "missing.md", ok=False))
    assert "go with `middle memory import git`" in middle(root, "import", "notes.md", "--since", "x",
                                                          ok=False).stderr
    assert docs(root) == []


def test_system_files_and_devices_are_refused_and_the_environment_never_imported(root, tmp_path):
    """`/proc/self/environ` once imported the environment (secrets) and `/dev/zero` "did not exist"."""
    secret = "MIDDLE_PROBE_SECRET=hunter2"
    environ = error_line(middle(root, "import", "/proc/self/environ", ok=False,
                                env={"MIDDLE_PROBE_SECRET": "hunter2"}))
    assert environ.startswith("error: /proc/self/environ is under /proc, a file of the system, not notes")
    assert "is under /sys" in error_line(middle(root, "import", "/sys/kernel", ok=False))
    zero = error_line(middle(root, "import", "/dev/zero", ok=False))
    assert zero.startswith("error: /dev/zero is not a regular file (a device, a pipe or a socket)")
    os.mkfifo(tmp_path / "pipe.md")  # a pipe would block the import for ever
    assert "is not a regular file (a device, a pipe or a socket)" in error_line(
        middle(root, "import", str(tmp_path / "pipe.md"), ok=False))
    (root / "link.md").symlink_to("/proc/self/environ")
    assert "is under /proc" in error_line(middle(root, "import", "link.md", ok=False))
    assert docs(root) == [] and secret not in middle(root, "export").stdout


def test_a_section_cut_to_max_doc_chars_is_warned_about_once(root):
    (root / "big.md").write_text("# Big\n" + "word " * 5_000)
    out = middle(root, "import", "big.md", "--no-progress")
    assert "imported 1 new doc(s)" in out.stdout
    assert out.stderr.count("cut to 20000") == 1, out.stderr


# -- issue 23 item 5: robustness of `import git` ---------------------------------------------------

def test_an_empty_repository_is_one_error_line_and_nothing_else(root):
    # With the progress bar on (the default) and stderr not a terminal, the bar printed a
    # blank line before the error.
    subprocess.run(["git", "init", "-q", str(root / "empty")], check=True)
    out = middle(root, "import", "git", "--repo", "empty", ok=False)
    assert out.stderr == "error: empty has no commits yet: there is no history to import\n"
    assert out.stdout == ""


@pytest.mark.parametrize("content", [
    b"{not json", b"\xff\xfe binary", b"[]", b'{"git": "x"}', b'{"git": {"REPO": "abc"}}',
    b'{"git": {"REPO": {"last": "not-a-sha"}}}', b'{"git": {"REPO": {"last": 7}}}'])
def test_a_corrupt_import_record_is_one_error_line_naming_it(root, content):
    middle(root, "import", "git", "--no-progress")
    record = root / ".middle" / "imports" / "demo.json"
    record.write_bytes(content.replace(b"REPO", str((root / "repo").resolve()).encode()))
    line = error_line(middle(root, "import", "git", "--no-progress", ok=False))
    assert line.startswith(f"error: the import record {record} is corrupt (") and "delete it" in line
    record.unlink()  # what the message says to do
    assert "nothing new" not in middle(root, "import", "git", "--no-progress").stderr
    assert len(docs(root)) == 1


def test_a_second_import_of_the_project_at_once_is_refused(root):
    from filelock import FileLock

    from orchestrator.memory.importers import lock_file

    (root / "notes.md").write_text(NOTES)
    lock = FileLock(str(lock_file(root / ".middle", "demo")))
    lock.acquire()  # another process's import of the project is running
    try:
        for args in (("git",), ("notes.md",)):
            line = error_line(middle(root, "import", *args, "--no-progress", ok=False))
            assert "another `middle memory import` of project 'demo' is running" in line
        assert docs(root) == []
    finally:
        lock.release()
    assert "imported 1 new commit(s)" in middle(root, "import", "git", "--no-progress").stdout


def history_repo(path: Path, n: int) -> list[str]:
    """A repository of n commits (one git fast-import), and their shas oldest first."""
    from orchestrator.bench.git_history import build_repo
    from orchestrator.bench.ticket_data import HistoryTicket

    tickets = [HistoryTicket(str(i), "", f"Change number {i} of the parser", f"Why {i}.",
                             [f"src/m{i % 7}.py"]) for i in range(n)]
    build_repo(path, tickets, n)
    return git(path, "rev-list", "--reverse", "HEAD").stdout.split()


def test_an_import_killed_mid_way_then_rerun_has_every_commit_once(root):
    shas = history_repo(root / "big", 2000)  # 8 batches
    record = root / ".middle" / "imports" / "demo.json"
    env = {k: v for k, v in os.environ.items() if k not in ("MIDDLE_CONFIG", "MEMORY_SAVE_DIR")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.main", "memory", "import", "git",
                             "--repo", "big", "--no-progress"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not record.exists() and proc.poll() is None:  # the first batch is in
            pass
        proc.kill()  # SIGKILL: no cleanup runs
    finally:
        proc.wait()
    assert proc.returncode == -9
    assert json.loads(record.read_text())["git"][str((root / "big").resolve())]["last"] != shas[-1]
    before = docs(root)
    assert 0 < len(before) < len(shas) and len(set(before)) == len(before)

    out = middle(root, "import", "git", "--repo", "big", "--no-progress")
    assert f"imported {len(shas) - len(before)} new commit(s)" in out.stdout
    stored = docs(root)
    assert sorted(d.split()[1] for d in stored) == sorted(s[:10] for s in shas)  # each once
    assert "nothing new to import" in middle(root, "import", "git", "--repo", "big", "--no-progress").stdout
    # The batches in before the kill keep their commit too (the rerun skipped them): none "unknown".
    assert f"by source: commit {len(shas):,}\n" in middle(root, "stats").stdout


def test_ctrl_c_in_an_import_keeps_what_went_in_and_says_how_to_go_on(root):
    """Ctrl-C part way (SIGINT, as a terminal sends it): one `interrupted:` line naming the command
    that goes on, exit 130, no traceback; the rerun brings in the rest, each commit once, every
    doc with its commit."""
    shas = history_repo(root / "big", 2000)
    record = root / ".middle" / "imports" / "demo.json"
    env = {k: v for k, v in os.environ.items() if k not in ("MIDDLE_CONFIG", "MEMORY_SAVE_DIR")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.main", "memory", "import", "git",
                             "--repo", "big", "--no-progress"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not record.exists() and proc.poll() is None:  # the first batch is in
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == [
        "interrupted: the docs imported so far are kept; run `middle memory import git` again to go "
        "on where it stopped"], err
    out = middle(root, "import", "git", "--repo", "big", "--no-progress")
    assert "new commit(s)" in out.stdout
    assert sorted(d.split()[1] for d in docs(root)) == sorted(s[:10] for s in shas)  # each once
    assert f"by source: commit {len(shas):,}\n" in middle(root, "stats").stdout


def test_two_imports_started_at_once_add_each_commit_once(root):
    shas = history_repo(root / "big", 1200)
    env = {k: v for k, v in os.environ.items() if k not in ("MIDDLE_CONFIG", "MEMORY_SAVE_DIR")}
    env["MIDDLE_AGENT_CACHE_DIR"] = str(root / "cache")
    command = [sys.executable, "-m", "orchestrator.cli.main", "memory", "import", "git", "--repo",
               "big", "--no-progress"]
    procs = [subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    ok = [out for p, out in zip(procs, outs) if p.returncode == 0]
    refused = [err for p, (_, err) in zip(procs, outs) if p.returncode != 0]
    assert ok and all(err.startswith("error: another `middle memory import` of project 'demo' is "
                                     "running") and err.count("\n") == 1 for err in refused)
    stored = docs(root)
    assert sorted(d.split()[1] for d in stored) == sorted(s[:10] for s in shas)  # each once


def test_middle_memory_show_says_which_commit_or_file_an_imported_doc_came_from(root, tmp_path):
    from orchestrator.memory.format import doc_id

    sha = change(root / "repo", "src/cache.py", "Cache sessions in Redis", when=1_600_000_000)
    middle(root, "import", "git", "--no-progress")
    (commit_doc,) = [d for d in docs(root) if "Cache sessions in Redis" in d]
    shown = middle(root, "show", doc_id(commit_doc)[:8]).stdout
    assert f"from: imported from commit {sha[:12]}" in shown, shown
    notes = tmp_path / "notes.md"
    notes.write_text("# Decisions\nWe keep tabs for indentation.\n")
    middle(root, "import", str(notes), "--no-progress")
    (note_doc,) = [d for d in docs(root) if "tabs for indentation" in d]
    assert f"imported from the file {notes.resolve()}" in middle(root, "show", doc_id(note_doc)[:8]).stdout
