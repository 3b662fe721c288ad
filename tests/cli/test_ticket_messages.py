"""What the ticket commands say: a broken ticket file in one line, in full the first time and then
one short line (`middle tickets` always lists each in full); no wait shown for a discarded ticket;
a ticket file without `project:` belongs to [project] id."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from orchestrator.cli.main import main
from tickets.store import TicketStore


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def write(root: Path, name: str, text: str) -> None:
    (root / "tickets" / name).write_text(text)


def said_about(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if name in line]


def test_a_broken_file_is_one_line_said_in_full_once_then_summed_up(project_dir, started):
    write(project_dir, "good.md", "---\ntitle: Good\nproject: demo\n---\nDo it.\n")
    write(project_dir, "plain.md", "Just some notes, no front matter.\n")
    write(project_dir, "typo.md", "---\ntitle: [unclosed\nproject: demo\n---\n")

    first = invoke("sync")
    assert first.exit_code == 1
    for name in ("plain.md", "typo.md"):  # in full, one line each, the path as the user wrote it
        (line,) = said_about(first.output, name)
        assert line.startswith(f"skipped: tickets/{name}: "), first.output
    assert "no YAML front matter: start the file with these lines: '---', 'title: " in first.output
    assert len(first.output.strip().splitlines()) == 3, first.output  # two files, then the count

    later = invoke("run")  # the same files, the same problems: one short line
    assert later.exit_code == 1
    assert said_about(later.output, "plain.md") == [] and said_about(later.output, "typo.md") == []
    assert "skipped: 2 ticket files are still broken: `middle tickets` lists them" in later.output, later.output

    write(project_dir, "new.md", "---\nproject: demo\n---\n")  # a new problem is said in full, the old ones summed up
    third = invoke("sync")
    assert said_about(third.output, "new.md") == ["skipped: tickets/new.md: missing 'title': add a line such as "
                                                  "'title: Fix the login bug' to the front matter"], third.output
    assert "skipped: 2 ticket files are still broken" in third.output

    listed = invoke("tickets")  # the place with the full detail, every time
    for name in ("plain.md", "typo.md", "new.md"):
        assert len(said_about(listed.output, f"skipped: tickets/{name}: ")) == 1, listed.output


def test_a_discarded_ticket_waits_for_nothing(project_dir):
    write(project_dir, "base.md", "---\ntitle: Base\nproject: demo\n---\n")
    write(project_dir, "top.md", "---\ntitle: Top\nproject: demo\ndepends_on: [base]\n---\n")
    assert invoke("sync").exit_code == 0
    with TicketStore(project_dir / ".middle" / "middle.sqlite3") as store:
        store.set_status("top", "discarded", "not wanted")
    listed = invoke("tickets")
    top = next(line for line in listed.output.splitlines() if line.startswith("│ top "))
    assert "discarded" in top and "base" not in top, listed.output


def test_a_ticket_without_project_belongs_to_the_configured_project(project_dir):
    write(project_dir, "a.md", "---\ntitle: A\n---\nDo it.\n")
    unset = invoke("sync")  # neither the file nor middle.toml names one: the error stays
    assert unset.exit_code == 1 and "missing 'project'" in unset.output and "[project] id" in unset.output
    (project_dir / "middle.toml").write_text('[project]\npath = "repo"\nid = "shop"\n')
    result = invoke("sync")
    assert result.exit_code == 0, result.output
    with TicketStore(project_dir / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("a").project_id == "shop"
    write(project_dir, "b.md", "---\ntitle: B\nproject: other\n---\n")  # one that names its project keeps it
    assert invoke("sync").exit_code == 0
    with TicketStore(project_dir / ".middle" / "middle.sqlite3") as store:
        assert store.get_ticket("b").project_id == "other"
    assert "│ a " in invoke("tickets").output
