"""Who changed the memory (issue 38): a named token's name on the API and on the board signed in
with it, the unnamed MIDDLE_API_TOKEN by its name, git's user on the CLI; the ticket page shows
the memories the agent said it used; the board offers Undo only where undo would succeed."""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest
from click.testing import CliRunner
from server_helpers import make_project

from orchestrator.cli.main import main as cli
from orchestrator.config.settings import load_config
from orchestrator.errors import ConfigError
from orchestrator.memory.curation import cli_user
from orchestrator.server.serve import check_bind, named_tokens

ALICE, BOB, OLD = "a" * 24, "b" * 24, "o" * 24
BASE = "/api/projects/calc/memory"


def test_each_token_s_name_is_who_made_the_change_on_the_api_and_the_board(serve, tmp_path):
    served = serve(make_project(tmp_path), token=OLD, tokens={"alice": ALICE, "bob": BOB})
    c = served.client
    r = c.post(f"{BASE}/docs", json={"text": "Sessions use signed cookies."},
               headers={"Authorization": f"Bearer {ALICE}"})
    assert r.status_code == 200, r.text
    ident = r.json()["id"]
    assert c.post(f"{BASE}/docs/{ident}/pin", headers={"Authorization": f"Bearer {OLD}"}).status_code == 200
    board = httpx.Client(base_url=served.url)  # bob signs in on the board with his token
    assert board.post("/login", data={"token": BOB, "next": "/"}).status_code == 303
    page = board.get("/projects/calc/memory")
    assert "signed in as bob" in page.text
    csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.text).group(1)
    r = board.post(f"{BASE}/docs/{ident}/unpin", headers={"X-CSRF-Token": csrf, "X-Middle-Board": "1"})
    assert r.status_code == 200, r.text
    # alice's CSRF token is not bob's session's: each session's derives from its own token
    alice = httpx.Client(base_url=served.url)
    alice.post("/login", data={"token": ALICE, "next": "/"})
    assert alice.post(f"{BASE}/docs/{ident}/pin", headers={"X-CSRF-Token": csrf}).status_code == 403
    who = [ch["who"] for ch in c.get(f"{BASE}/changes", headers={"Authorization": f"Bearer {ALICE}"}).json()["changes"]]
    assert who == ["board bob", "api MIDDLE_API_TOKEN", "api alice"]
    assert c.get(f"{BASE}/docs", headers={"Authorization": "Bearer " + "z" * 24}).status_code == 401


def test_named_tokens_come_from_the_environment_and_bad_ones_are_one_error(tmp_path):
    (tmp_path / "middle.toml").write_text('[server]\ntokens = {alice = "TOKEN_ALICE"}\n')
    config = load_config(tmp_path / "middle.toml", environ={})
    assert named_tokens(config.server.tokens, {"TOKEN_ALICE": ALICE}) == {"alice": ALICE}
    with pytest.raises(ConfigError, match="TOKEN_ALICE, which is not set: export it"):
        named_tokens(config.server.tokens, {})
    with pytest.raises(ConfigError, match="the token of 'alice'.*3 characters long"):
        check_bind("0.0.0.0", None, {"alice": "abc"})
    check_bind("0.0.0.0", None, {"alice": ALICE})  # a named token is enough to serve other addresses
    (tmp_path / "middle.toml").write_text('[server]\ntokens = {alice = "the-secret itself"}\n')
    with pytest.raises(ConfigError, match="not an environment variable's name"):
        load_config(tmp_path / "middle.toml", environ={})


def test_the_cli_records_git_s_user_and_the_os_user_without_one(tmp_path, monkeypatch):
    repo = tmp_path / "proj"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "Ada Lovelace"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "ada@example.org"], check=True)
    assert cli_user(repo) == "Ada Lovelace <ada@example.org>"
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "none"))  # no global name either
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    assert cli_user(tmp_path).endswith("@" + __import__("socket").gethostname())

    config = make_project(tmp_path / "site")
    monkeypatch.chdir(repo)  # the person git knows where `middle` runs
    runner = CliRunner()
    toml = str(config.source)
    out = runner.invoke(cli, ["--config", toml, "memory", "add", "The CSV export streams rows."])
    assert out.exit_code == 0, out.output
    out = runner.invoke(cli, ["--config", toml, "memory", "history"])
    assert "Ada Lovelace <ada@example.org>" in out.output


def test_the_ticket_page_shows_the_memories_the_agent_said_it_used(server):
    state = server.state
    state.sync_folder()
    store = state.store
    run_id = store.claim_new_run("001-greeting", ["pending"])
    store.start_turn(run_id, 1, "Add a greeting.", None, False)
    store.finish_turn(run_id, 1, response="done", is_error=False, error=None, cost_usd=0.0,
                      duration_ms=10, usage={}, num_turns=1)
    store.set_turn_assessment(run_id, 1, "[abcd1234] Sessions use cookies.", {
        "complete": True, "summary": "Greeting added.",
        "memories_used": [{"id": "abcd1234", "why": "it says how sessions work"}]})
    page = server.client.get("/tickets/001-greeting").text
    used = page[page.index("Memories used"):]
    assert "abcd1234" in used[:400] and "it says how sessions work" in used[:400]


def test_undo_is_offered_only_where_the_server_would_do_it(server):
    c = server.client
    ident = c.post(f"{BASE}/docs", json={"text": "Sessions use signed cookies."}).json()["id"]
    edited = c.post(f"{BASE}/docs/{ident}/edit", json={"text": "Sessions use JWT."}).json()
    c.post(f"{BASE}/docs/{edited['id']}/edit", json={"text": "Sessions use JWT tokens."})
    page = c.get("/projects/calc/memory").text
    offered = {int(n) for n in re.findall(r'data-change="(\d+)">(?:(?!</li>).)*?data-action="undo"', page, re.S)}
    # change 2 (the first edit) cannot be undone: its doc was edited again since (change 3)
    assert offered == {1, 3}
    assert c.post(f"{BASE}/changes/2/undo").status_code == 400
    assert c.post(f"{BASE}/changes/3/undo").status_code == 200


@pytest.mark.cli
def test_a_ticket_doc_says_who_ran_the_ticket(server, claude_cli):
    from server_helpers import wait_for_run

    c = server.client
    run = c.post("/api/tickets/001-greeting/run").json()["run_id"]
    assert wait_for_run(c, run)["status"] == "complete"
    runner = cli_user(server.state.config.root)
    (doc,) = c.get(f"{BASE}/docs", params={"source": "ticket"}).json()["docs"]
    assert doc["author"] == runner and doc["tickets"][0]["by"] == runner
    shown = c.get(f"{BASE}/docs/{doc['id']}").json()
    assert f"ticket 001-greeting (run by {runner})" in shown["from"]
    # a pin makes a state row for the doc: its author is still who ran the ticket
    assert c.post(f"{BASE}/docs/{doc['id']}/pin").status_code == 200
    assert c.get(f"{BASE}/docs", params={"author": runner.split()[0]}).json()["docs"][0]["author"] == runner


def test_the_board_shows_a_change_s_whole_before_and_after(server):
    c = server.client
    long = "Sessions: " + "the cookie is signed and rotated; " * 8 + "the last words before."
    ident = c.post(f"{BASE}/docs", json={"text": long}).json()["id"]
    c.post(f"{BASE}/docs/{ident}/edit", json={"text": long.replace("last words before", "last words after")})
    page = c.get("/projects/calc/memory").text
    change = page[page.index('data-change="2"'):]
    change = change[:change.index("</li>")]
    assert "Full before and after" in change
    assert "the last words before.</pre>" in change and "the last words after.</pre>" in change
