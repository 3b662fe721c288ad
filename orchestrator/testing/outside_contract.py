"""Mixed into MemoryBackendContract: an instance that holds the store open catches up on what
another program wrote in it (MemoryBackend.catch_up), as `middle run` must between turns when a
person edits the store with another tool.

Opt in with an `outside_writer` fixture: a callable `write(store_dir, op, old, new)` that writes
your store as another program would (its own connection or process, none of your backend's
code): op "add" adds the doc `new`, "edit" rewrites the doc `old` to `new` in place, "forget"
deletes `old`. Without it the test is skipped with the reason. The facade calls `catch_up()`
before every call; the test calls it as the facade does, then recalls through `retrieve`::

    @pytest.fixture
    def outside_writer(self):
        def write(store_dir, op, old, new):
            with sqlite3.connect(store_dir / "mystore.sqlite3") as conn:
                ...
        return write
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.plugins.memory_backend import MemoryBackend
from orchestrator.testing.samples import sample_doc

OutsideWriter = Callable[[Path, str, "str | None", "str | None"], None]


class OutsideWritesContract:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the test uses of MemoryBackendContract, which mixes this in
        def require(self, *flags: str) -> None: ...
        def assert_found(self, backend: MemoryBackend, doc: str) -> None: ...
        def assert_absent(self, backend: MemoryBackend, doc: str) -> None: ...

    @pytest.fixture
    def outside_writer(self) -> OutsideWriter | None:
        """Override it to run the test (see the module docstring)."""
        return None

    @pytest.mark.parametrize("op", ["add", "edit", "forget"])
    def test_an_open_instance_catches_up_on_what_another_program_wrote(
            self, opener: Any, store_dir: Path, outside_writer: OutsideWriter | None, op: str) -> None:
        self.require("stores_docs", "persistent")
        if outside_writer is None:
            pytest.skip("no outside_writer fixture: give one to check that an open instance catches "
                        "up on docs another program writes (MemoryBackend.catch_up)")
        kept, old, new = (sample_doc(i, tag="outside") for i in range(3))
        backend = opener.open()
        backend.index([kept, old])
        self.assert_found(backend, old)  # what it derives from the docs is built and read
        outside_writer(store_dir, op, None if op == "add" else old, None if op == "forget" else new)
        backend.catch_up()
        self.assert_found(backend, kept)
        if op != "add":
            self.assert_absent(backend, old)
        if op != "forget":
            self.assert_found(backend, new)
            assert backend.has_doc(new), "the doc another program wrote is not found by its text"
