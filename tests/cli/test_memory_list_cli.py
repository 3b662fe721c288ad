"""`middle memory list` of a big store: every doc once, with its marks, in a few writes (one per
doc was 43 of 55 s of a list of 100,000 docs, Rich's own work per call)."""

from __future__ import annotations

import io

from click.testing import CliRunner

from orchestrator.cli.main import main
from orchestrator.config.settings import load_config
from orchestrator.memory.format import doc_id
from orchestrator.services import Services

DOCS = 2_500  # more than two of the list's batches


class CountingFile(io.StringIO):
    """What the console writes, and how many writes it took."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_a_big_list_prints_every_doc_once_with_its_marks_in_few_writes(tmp_path, monkeypatch):
    from orchestrator.cli import main as cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORY_SAVE_DIR", raising=False)
    (tmp_path / "middle.toml").write_text('[memory]\nsave_dir = "mem"\nbackend = "bm25"\n[project]\nid = "calc"\n')
    docs = [f"Ticket: Task {i}. Changed module m{i % 97}." for i in range(DOCS)]
    services = Services(load_config(tmp_path / "middle.toml", environ={}))
    try:
        services.memory.index("calc", docs)
        curator = services.curator()
        curator.pin("calc", doc_id(docs[1500])[:12], "me")
        curator.supersede("calc", doc_id(docs[7])[:12], "Ticket: Task 7, done again.", "me")
    finally:
        services.close()
    out = CountingFile()
    # the console's own `_file`, which is None (sys.stdout at each print): patching its `file`
    # property would restore it to the stdout of this moment, pinning later tests' output there
    monkeypatch.setattr(cli.console, "_file", out)
    result = CliRunner().invoke(main, ["memory", "list"])
    assert result.exit_code == 0 and "Traceback" not in result.output
    lines = out.getvalue().splitlines()
    listed = [line for line in lines if not line.startswith(" ")]
    assert len(listed) == DOCS + 1 and len(set(listed)) == DOCS + 1
    assert all(f"{doc_id(d)[:8]}  {d}" in listed for d in docs)
    assert lines[lines.index(f"{doc_id(docs[1500])[:8]}  {docs[1500]}") + 1].strip() == "(pinned)"
    assert lines[lines.index(f"{doc_id(docs[7])[:8]}  {docs[7]}") + 1].strip().startswith("(superseded by ")
    assert out.writes < DOCS / 100, out.writes
