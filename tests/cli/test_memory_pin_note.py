"""`middle memory pin` (and the API's and the board's pin, which share its message) says when
the project's pins no longer fit the agent's block: past half its related part a pin reaches
the agent only when a query finds it (memory.format.place_pins), which a person who just pinned
a doc must be told."""

from __future__ import annotations

from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.memory.format import doc_id

RULES = [f"Rule {k}: every handler in package p{k} logs its request id, user id and the time it "
         f"took, and returns errors as JSON objects with a code and a message." for k in range(8)]


def test_pinning_past_the_block_s_room_says_so_and_a_few_pins_do_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    (tmp_path / "middle.toml").write_text('[memory]\nsave_dir = "mem"\nbackend = "bm25"\n[project]\nid = "calc"\n')
    runner = CliRunner()
    notes = []
    for rule in RULES:
        assert runner.invoke(main, ["memory", "add", rule]).exit_code == 0
        pinned = runner.invoke(main, ["memory", "pin", doc_id(rule)[:8]])
        assert pinned.exit_code == 0 and "pinned" in pinned.output, pinned.output
        notes.append(" ".join(pinned.output.split()))
    assert not any("note:" in n for n in notes[:2])  # two rules fit in the share
    assert "pinned; note: 8 docs are pinned, and the agent's block puts" in notes[-1] and "unpin some" in notes[-1]
    unpinned = runner.invoke(main, ["memory", "unpin", doc_id(RULES[0])[:8]])
    assert unpinned.exit_code == 0 and "note:" not in unpinned.output
