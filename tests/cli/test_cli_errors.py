"""The CLI edge: user mistakes print one `error:` line and exit non-zero, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.testing import make_repo


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for var in ("MEMORY_SAVE_DIR", "MIDDLE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    make_repo(tmp_path / "repo")
    (tmp_path / "tickets").mkdir()
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def write_config(root: Path, memory: str = "") -> None:
    (root / "middle.toml").write_text(f'[project]\npath = "repo"\n{memory}')


def ticket(root: Path, name: str, front: str, body: str = "Do it.") -> None:
    (root / "tickets" / name).write_text(f"---\n{front}\n---\n{body}\n")


def assert_clean_error(result, *needles: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for needle in needles:
        assert needle in result.output, result.output


def test_unknown_backend_name(workdir):
    write_config(workdir, '[memory]\nsave_dir = "m"\nbackend = "hipporagg"\n')
    result = invoke("run", "--fake")
    assert_clean_error(result, "error: unknown memory backend 'hipporagg'", "sliding_window")


def test_unknown_backend_option(workdir):
    write_config(workdir, '[memory]\nsave_dir = "m"\nbackend = "sliding_window"\n[memory.options]\nwindw = 3\n')
    assert_clean_error(invoke("run", "--fake"), "error: bad [memory.options]", "windw", "window_size")


def test_unknown_config_key(workdir):
    (workdir / "middle.toml").write_text("[agent]\nmodle = 'x'\n")
    assert_clean_error(invoke("tickets"), "error:", "agent.modle")


@pytest.mark.parametrize("section", ["agent", "run"])
def test_a_coding_agent_option_in_another_section_says_where_it_goes(workdir, section):
    """`turn_timeout_s` under [agent] or [run] (where a new user looks for a turn timeout): the
    error names [coding_agent.options], not only "Extra inputs are not permitted"."""
    (workdir / "middle.toml").write_text(f'[project]\npath = "repo"\n[{section}]\nturn_timeout_s = 4\n')
    result = invoke("run", "--fake")
    assert_clean_error(result, f"error: bad configuration: {section}.turn_timeout_s",
                       "`turn_timeout_s` is a coding agent's option, set under [coding_agent.options]")
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output


def test_no_api_key_says_how_to_run_offline_and_claims_nothing(workdir):
    write_config(workdir)
    ticket(workdir, "a.md", "title: Something\nproject: demo")
    assert_clean_error(invoke("run"), "error: ANTHROPIC_API_KEY is not set", "--fake")
    from tickets.store import TicketStore

    with TicketStore(workdir / ".middle" / "middle.sqlite3") as store:  # nothing ran, nothing failed
        assert store.get_ticket("a").status.value == "pending" and store.latest_run("a") is None


def test_bad_ticket_files_are_named_and_the_rest_still_load(workdir, monkeypatch):
    write_config(workdir)
    ticket(workdir, "a-no-title.md", "project: demo")
    ticket(workdir, "b-unsafe.md", "title: Escape\nproject: ../x")
    ticket(workdir, "c-no-path.md", "title: Lost\nproject: demo\npath: /does/not/exist")
    ticket(workdir, "d-good.md", "title: Good one\nproject: demo")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    from orchestrator.running.orchestrator import Orchestrator

    monkeypatch.setattr(Orchestrator, "run_ticket", lambda self, tid: pytest.fail("no run expected"))
    result = invoke("run", "no-such-ticket")
    out = result.output
    assert "a-no-title.md" in out and "title" in out
    assert "b-unsafe.md" in out and "'../x'" in out
    assert "c-no-path.md" in out and "/does/not/exist" in out
    assert_clean_error(result, "error: no ticket 'no-such-ticket'")
    listing = invoke("tickets")
    assert "d-good" in listing.stdout and "a-no-title" not in listing.stdout
    assert "a-no-title.md" in listing.stderr  # the folder's problems are still named


def test_unknown_ticket_in_log_revert_resume(workdir):
    write_config(workdir)
    for args in (("log", "nope"), ("revert", "nope"), ("resume", "nope", "--fake")):
        assert_clean_error(invoke(*args), "error: no ticket 'nope'")


def test_a_ticket_file_not_taken_in_yet_says_what_takes_it_in(workdir):
    """A ticket file written a moment ago is listed by `middle tickets`, but feedback, resume and
    revert read the store: their error names the commands that take the file in."""
    write_config(workdir)
    ticket(workdir, "fresh.md", "title: Fresh\nproject: demo")
    assert "fresh" in invoke("tickets").stdout
    for args in (("feedback", "fresh", "more", "--fake"), ("revert", "fresh"), ("resume", "fresh", "--fake")):
        assert_clean_error(invoke(*args), "error: no ticket 'fresh'", "taken in by `middle run` or `middle sync`")


def test_memory_commands_need_memory_on(workdir):
    write_config(workdir)
    assert_clean_error(invoke("memory", "list"), "error: memory is off")


def test_memory_command_rejects_unsafe_project_id(workdir):
    write_config(workdir, '[memory]\nsave_dir = "m"\n')
    assert_clean_error(invoke("memory", "add", "x", "--project", "../x"), "error: project id '../x'", "no '/', no '..'")
    assert not (workdir / "x").exists()


def test_missing_config_file(workdir):
    assert_clean_error(invoke("--config", "nope.toml", "tickets"), "error: config file nope.toml does not exist")


def test_run_names_a_ticket_by_its_file_and_says_why_a_malformed_one_was_skipped(workdir, monkeypatch):
    write_config(workdir)
    ticket(workdir, "001-good.md", "title: Good\nproject: demo\nid: good-one")
    (workdir / "tickets" / "002-bad.md").write_text("---\ntitle: [unclosed\nproject: demo\n---\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    from orchestrator.running import batch
    seen = []
    monkeypatch.setattr(batch, "run_batch", lambda orch, ids, **kw: seen.append(ids) or batch.BatchResult())
    assert invoke("run", "tickets/001-good.md").exit_code == 0 and seen == [["good-one"]]
    result = invoke("run", "002-bad")
    assert_clean_error(result, "error: ticket '002-bad' was skipped:", "not valid YAML")


def test_a_project_that_is_not_a_git_repository_is_one_error_and_nothing_is_claimed(workdir, monkeypatch):
    import shutil

    shutil.rmtree(workdir / "repo" / ".git")
    write_config(workdir)
    ticket(workdir, "a.md", "title: Something\nproject: demo")
    result = invoke("run", "--fake")
    assert_clean_error(result, "is not in a git repository", "git init", 'isolation = "none"')
    assert [line for line in result.output.splitlines() if line.startswith("error:")].__len__() == 1
    from tickets.store import TicketStore

    with TicketStore(workdir / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("a").status.value == "pending" and store.latest_run("a") is None


class RejectsEveryKey:
    """The fake Messages API answering as the real one does to a revoked key."""

    def respond(self, channel, body):
        from orchestrator.fake_api import api_error

        return api_error(401, "invalid x-api-key", "authentication_error")


def _store_notes(root: Path) -> dict[str, str | None]:
    from tickets.store import TicketStore

    with TicketStore(root / ".middle" / "middle.sqlite3") as store:
        return {t.id: t.status_reason for t in store.list_tickets() if t.status.value == "pending"}


@pytest.mark.parametrize("parallel", ["1", "3"])
def test_a_model_api_that_cannot_be_used_is_said_once_and_the_summary_counts_the_pending_tickets(
        workdir, monkeypatch, parallel):
    from orchestrator.fake_api import FakeMessagesAPI

    write_config(workdir)
    for name in ("a", "b", "c"):
        ticket(workdir, f"{name}.md", f"title: Ticket {name}\nproject: demo")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    result = invoke("run", "--parallel", parallel)
    assert_clean_error(result, "error: cannot reach the Messages API")
    assert result.output.count("cannot reach the Messages API") == 1, result.output
    assert "3 ticket(s): 0 complete, 0 failed, 3 still pending" in result.output
    assert set(_store_notes(workdir)) == {"a", "b", "c"}
    with FakeMessagesAPI(RejectsEveryKey()) as api:  # the next batch: the key is rejected
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        result = invoke("run")
    assert_clean_error(result, "error: the Messages API rejected the API key (401)")
    assert result.output.count("rejected the API key") == 1, result.output
    assert "3 ticket(s): 0 complete, 0 failed, 3 still pending" in result.output
    notes = _store_notes(workdir)
    assert set(notes) == {"a", "b", "c"}  # still pending, and no note says the old batch's error
    assert not any("cannot reach" in (note or "") for note in notes.values()), notes


def test_an_unreachable_model_api_stops_the_batch_with_one_error_and_leaves_tickets_pending(workdir, monkeypatch):
    write_config(workdir)
    for name in ("a", "b", "c"):
        ticket(workdir, f"{name}.md", f"title: Ticket {name}\nproject: demo")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    result = invoke("run")
    assert_clean_error(result, "error: cannot reach the Messages API at http://127.0.0.1:9")
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1
    from tickets.store import TicketStore

    with TicketStore(workdir / ".middle" / "middle.sqlite3") as store:
        assert [store.get_ticket(t).status.value for t in "abc"] == ["pending"] * 3
        assert store.latest_run("b") is None and store.latest_run("c") is None
        worktree = Path(store.latest_run("a")["worktree"])
    # Ticket a's run had made its worktree and branch before the model failed: nothing was done
    # in them, so they are removed (before, both were left behind) and the run says so.
    from orchestrator.workspace.git import out

    assert "removed ticket a's worktree and branch: no work was done in them" in result.output
    assert not worktree.exists() and out(workdir / "repo", "branch", "--list", "middle/*") == ""


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5"])
def test_parallel_that_is_no_positive_integer_says_what_it_wants(workdir, value):
    write_config(workdir)
    for command in ("run", "worker"):  # `middle worker --parallel` says it the same way
        result = invoke(command, "--parallel", value)
        assert_clean_error(result, "error:", f"'{value}': give a positive integer", "tickets to run at once")
        assert "valid integer range" not in result.output and "not in the range" not in result.output


def test_tickets_lists_every_ticket_but_fails_on_a_dependency_that_names_no_ticket(workdir):
    write_config(workdir)
    ticket(workdir, "001-ok.md", "title: Fine\nproject: demo")
    ticket(workdir, "002-bad.md", "title: Broken\nproject: demo\ndepends_on: [000-gone]")
    result = invoke("tickets")
    assert_clean_error(result, "error:", "depends_on names no ticket: '000-gone'")
    listed = [line for line in result.output.splitlines() if "│ 00" in line]
    assert [line.split("│")[1].strip() for line in listed] == ["001-ok", "002-bad"]
    assert "bad depends_on" in listed[1] and "bad depends_on" not in listed[0]


@pytest.mark.parametrize("section, key", [("coding_agent.options", "bogus"), ("memory.options", "windw")])
@pytest.mark.parametrize("command", [["tickets"], ["log", "a"], ["sync"], ["diff", "a"], ["gc"]])
def test_every_command_that_loads_the_config_refuses_an_unknown_option(workdir, section, key, command):
    write_config(workdir, f'[memory]\nbackend = "sliding_window"\n[{section}]\n{key} = 1\n')
    ticket(workdir, "a.md", "title: Something\nproject: demo")
    assert_clean_error(invoke(*command), f"error: bad [{section}]", key)
    # fixed, the same command no longer says so (a refused config is never remembered as valid)
    write_config(workdir, '[memory]\nbackend = "sliding_window"\n')
    assert f"bad [{section}]" not in invoke(*command).output


def test_run_of_a_complete_ticket_says_what_to_do_before_asking_for_an_api_key(workdir):
    write_config(workdir)
    ticket(workdir, "a.md", "title: Something\nproject: demo")
    assert_clean_error(invoke("run", "a"), "ANTHROPIC_API_KEY is not set")  # creates the store
    from tickets.store import TicketStore

    with TicketStore(workdir / ".middle" / "middle.sqlite3") as store:
        store.set_status("a", "complete", "done")
    result = invoke("run", "a")
    assert_clean_error(result, "error: ticket 'a' is already complete: mark it merged with `middle merge a`")
    assert "ANTHROPIC_API_KEY" not in result.output
    assert invoke("run").exit_code == 0  # nothing pending: nothing to run, no key needed


def test_tickets_synced_from_elsewhere_are_used_when_the_ticket_folder_is_missing(workdir):
    """`middle sync --from ...` (GitHub, another folder), then `middle tickets` and `middle run`
    with no tickets/ folder: a warning, not an error; with nothing stored it stays an error."""
    import shutil

    write_config(workdir)
    shutil.rmtree(workdir / "tickets")
    assert_clean_error(invoke("tickets"), "error: ticket folder", "does not exist")
    (workdir / "elsewhere").mkdir()
    (workdir / "elsewhere" / "a.md").write_text("---\nid: a\nproject: demo\ntitle: A\n---\nDo it.\n")
    assert invoke("sync", "--from", "markdown:elsewhere").exit_code == 0
    listing = invoke("tickets")
    assert listing.exit_code == 0, listing.output
    assert "no such ticket folder; the tickets already in the store are used" in listing.output
    assert "a " in listing.output and "pending" in listing.output
    ran = invoke("run", "--fake", "a")
    assert "does not exist" not in ran.output and "no such ticket folder" in ran.output, ran.output
    assert "Traceback" not in ran.output


@pytest.mark.parametrize("args", [["--bogus", "tickets"], ["--config"], ["--fake", "doctor"]])
def test_a_bad_option_of_middle_itself_is_one_error_line(workdir, args):
    """Before the command name (`middle --fake doctor`): one `error:` line, not click's usage block."""
    result = invoke(*args)
    assert_clean_error(result, "error:", " --help`)")
    assert "Usage:" not in result.output and len(result.output.strip().splitlines()) == 1
    assert ("goes after the command's name, as in `middle run --fake`" in result.output) == (args[0] == "--fake")


@pytest.mark.parametrize("group", ["memory", "bench"])
def test_a_command_group_alone_shows_its_help_not_an_error(workdir, group):
    result = invoke(group)
    assert f" {group} [OPTIONS] COMMAND" in result.output and "error:" not in result.output
    assert "Commands:" in result.output


def test_a_project_path_that_does_not_exist_names_the_config_key(workdir):
    """[project] path naming a missing folder: every ticket is skipped saying to fix that key,
    not the ticket (which has no path: of its own)."""
    (workdir / "middle.toml").write_text('[project]\nid = "demo"\npath = "rep"\n')
    ticket(workdir, "a.md", "title: A")
    result = invoke("run", "--fake")
    assert_clean_error(result, "project path", "does not exist: fix [project] path in middle.toml")
