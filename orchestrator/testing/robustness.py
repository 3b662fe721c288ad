"""Contract tests for what breaks stores in real use: other instances, failed writes, bad input.

`MemoryBackendContract` inherits these; they use its fixtures (`opener`, `backend`,
`store_dir`) and helpers (`require`, `assert_found`, `assert_absent`). What they check:

- Two instances on one store dir, used alternately, see each other's changes. The facade
  serialises calls per project across processes with a file lock, but each process keeps its
  backend instance between calls: a backend that trusts state it read earlier loses docs and
  brings deleted ones back.
- A write that fails (the `fail_writes` fixture) leaves the backend unchanged and usable.
- Non-string docs and lone surrogates are refused with an exception before anything changes.
- Leftover temp files of a killed write do not break opening the store.
- Each store file emptied, cut short or with one 4 KiB block of garbage: the store reads its
  docs right, or raises a MiddleError (MemoryStoreError) naming the file; never an empty or
  partial memory read as if it were whole. A write into it is refused the same way, or
  taken by a store that then reads right (docs and the new one).
- Real processes writing one store concurrently lose nothing (`process_factory`).
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

import pytest

from orchestrator.errors import MiddleError
from orchestrator.plugins.memory_backend import MemoryBackend, RetrieveResult
from orchestrator.testing.damage import DAMAGES, damage_file
from orchestrator.testing.processes import run_processes
from orchestrator.testing.samples import sample_doc

BAD_DOCS = {
    "None": None,
    "bytes": b"bytes are not text",
    "int": 123,
    "lone surrogate": "half a pair \ud83d here",
}
REFUSALS = (TypeError, ValueError, MiddleError)  # MiddleError covers MemoryStoreError


@contextmanager
def file_size_limit_zero() -> Iterator[None]:
    """Make every write that grows a file fail with EFBIG (RLIMIT_FSIZE=0), even as root.

    Process-wide while it lasts, so keep the block to the one call under test.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        pytest.skip("no RLIMIT_FSIZE here: override the fail_writes fixture")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    sigxfsz = getattr(signal, "SIGXFSZ", None)
    previous = signal.signal(sigxfsz, signal.SIG_IGN) if sigxfsz else None  # EFBIG, not death
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        if sigxfsz:
            signal.signal(sigxfsz, previous)


class SharedStoreContract:
    """Mixed into MemoryBackendContract; see the module docstring."""

    writes_to_disk = True  # False: keeps docs in this process only; no failed-write test
    # "package.module:callable" opening the backend as `callable(store_dir)` in a fresh
    # process (a backend class with default options will do); None skips the process test.
    process_factory: str | None = None
    process_docs_per_thread = 12
    # "package.module:callable" giving, as `callable(store_dir)`, the reusable lock every call
    # of the process test holds (default: a file lock, as the facade takes on one machine; a
    # database's advisory lock makes the processes stand for machines).
    process_lock: str | None = None
    # A file name shaped like your backend's own temp files, e.g. ".mystore-1234.tmp": the
    # leftover test drops one (holding half a write) before opening the store.
    leftover_temp_file: str | None = None

    if TYPE_CHECKING:  # what the tests below use of MemoryBackendContract, which mixes this in
        supports_list_docs: bool

        @property
        def k(self) -> int: ...
        def found(self, doc: str, result: RetrieveResult) -> bool: ...
        def assert_found(self, backend: MemoryBackend, doc: str) -> None: ...
        def assert_absent(self, backend: MemoryBackend, doc: str) -> None: ...

    @pytest.fixture
    def fail_writes(self) -> Callable[[], AbstractContextManager[None]]:
        """Returns a context manager under which the backend's writes fail.

        The default limits file size to zero, which fails any write that grows a file. Override
        it if your backend writes otherwise (e.g. monkeypatch the function that saves).
        """
        return file_size_limit_zero

    def assert_contents(self, backend: MemoryBackend, docs: list[str],
                        gone: tuple[str, ...] | list[str] = ()) -> None:
        """The store holds exactly docs (in order, if it can list them) and none of gone."""
        if self.supports_list_docs:
            assert backend.list_docs() == docs
        for doc in docs:
            self.assert_found(backend, doc)
        for doc in gone:
            self.assert_absent(backend, doc)

    # --- tests -----------------------------------------------------------------------------

    def test_two_instances_see_each_others_changes(self, opener):
        self.require("stores_docs", "persistent")
        a, b, c = (sample_doc(i, tag="shared") for i in range(3))
        first, second = opener.open(), opener.open()
        first.index([a])
        second.index([b])
        self.assert_contents(first, [a, b])
        second.index([a])  # written by the other instance: already there, not added twice
        self.assert_contents(first, [a, b])
        if self.supports_delete:
            assert second.delete([a]) == 1
            self.assert_contents(first, [b], gone=[a])
            assert first.delete([a]) == 0, "counted a doc the other instance had deleted"
            first.index([a])  # re-adding what the other deleted must not be skipped as known
            self.assert_contents(second, [b, a])
            first.index([c])
            assert second.delete([b]) == 1
            self.assert_contents(first, [a, c], gone=[b])
            expected = [a, c]
        else:
            expected = [a, b]
        first.flush()
        second.flush()
        opener.close(first)
        opener.close(second)
        self.assert_contents(opener.open(), expected)

    @pytest.mark.parametrize("kind", sorted(BAD_DOCS))
    def test_bad_docs_are_refused_and_change_nothing(self, backend, kind):
        good, other = sample_doc(1, tag="good"), sample_doc(2, tag="good")
        backend.index([good])
        with pytest.raises(REFUSALS):
            backend.index([other, BAD_DOCS[kind]])  # the good doc before it must not be kept
        with pytest.raises(REFUSALS):
            backend.delete([good, BAD_DOCS[kind]])
        if self.stores_docs:
            self.assert_contents(backend, [good], gone=[other])
            backend.index([other])  # still usable
            self.assert_contents(backend, [good, other])

    def test_a_single_string_is_not_taken_for_a_list_of_docs(self, backend):
        with pytest.raises(REFUSALS):
            backend.index("a single string, not a list")
        if self.stores_docs:
            self.assert_contents(backend, [], gone=["a"])

    def test_failed_write_changes_nothing(self, opener, fail_writes):
        self.require("stores_docs", "writes_to_disk")
        a, b, c = (sample_doc(i, tag="failing") for i in range(3))
        backend = opener.open()
        backend.index([a, b])
        backend.flush()
        attempts = [("index", [c])] + ([("delete", [a])] if self.supports_delete else [])
        for method, docs in attempts:
            error = None
            with fail_writes():
                try:
                    getattr(backend, method)(docs)
                except Exception as exc:  # noqa: BLE001 - any error will do; state is checked
                    error = exc
            assert error is not None, (
                f"{method} succeeded while writes were failing: if your backend writes in a way "
                "the fail_writes fixture does not break, override that fixture"
            )
            self.assert_contents(backend, [a, b], gone=[c])
        backend.index([c])
        expected = [a, b, c]
        if self.supports_delete:
            assert backend.delete([a]) == 1
            expected = [b, c]
        self.assert_contents(backend, expected)
        if self.persistent:
            backend.flush()
            opener.close(backend)
            self.assert_contents(opener.open(), expected)

    def test_leftover_temp_files_do_not_break_opening(self, opener, store_dir):
        self.require("stores_docs", "persistent")
        a, b = sample_doc(1, tag="leftover"), sample_doc(2, tag="leftover")
        first = opener.open()
        first.index([a])
        first.flush()
        opener.close(first)
        store_dir.mkdir(parents=True, exist_ok=True)
        half_a_write = '{"version": 1, "docs": ["half of a killed wri'
        for name in filter(None, ["killed-write.tmp", self.leftover_temp_file]):
            (store_dir / name).write_text(half_a_write, encoding="utf-8")
        second = opener.open()
        self.assert_contents(second, [a])
        second.index([b])
        self.assert_contents(second, [a, b])

    @pytest.mark.parametrize("how", DAMAGES)
    def test_a_damaged_store_file_is_read_right_or_an_error_naming_it(self, opener, store_dir,
                                                                        tmp_path, how):
        self.require("stores_docs", "persistent", "writes_to_disk")
        docs = [sample_doc(i, tag="damaged") for i in range(12)]
        backend = opener.open()
        for doc in docs:
            backend.index([doc])
        backend.flush()
        opener.close(backend)
        pristine = tmp_path / "pristine-store"
        if store_dir.is_dir():
            shutil.copytree(store_dir, pristine)
        files = [p.relative_to(pristine) for p in sorted(pristine.rglob("*"))
                 if p.is_file() and p.stat().st_size]
        if not files:  # e.g. a store in a database server
            pytest.skip(f"the backend keeps no file in its store directory {store_dir}")
        for name in files:
            shutil.rmtree(store_dir)
            shutil.copytree(pristine, store_dir)
            damage_file(store_dir / name, how)
            self._assert_read_right_or_refused(opener, docs, name.name)

    def _assert_read_right_or_refused(self, opener, docs: list[str], file_name: str) -> None:
        refused = self._read_right_or_refused(opener, docs, file_name)
        # A write: refused naming the file too, or taken by a store that then reads right (a
        # write into a damaged file can succeed while pages it did not touch are lost).
        extra = sample_doc(99, tag="written after the damage")
        backend = None
        try:
            backend = opener.open()
            backend.index([extra])
            backend.flush()
        except MiddleError as exc:
            assert file_name in str(exc), (
                f"the error for a write into a damaged {file_name} does not name it: {exc}")
            return
        finally:
            if backend is not None:
                opener.close(backend)
        assert not refused, f"{file_name} damaged: reads are refused, but a write was taken"
        assert not self._read_right_or_refused(opener, [*docs, extra], file_name), (
            f"{file_name} damaged: a write was taken, then the store was refused")

    def _read_right_or_refused(self, opener, docs: list[str], file_name: str) -> bool:
        """Read the store: True when refused with an error naming the file, False when it
        holds exactly `docs`; anything else fails the test."""
        backend = None
        try:
            backend = opener.open()
            listed = backend.list_docs() if self.supports_list_docs else None
            found = [self.found(doc, backend.retrieve([doc], self.k)[0]) for doc in docs]
        except MiddleError as exc:
            assert file_name in str(exc), (
                f"the error for a damaged {file_name} does not name it: {exc}")
            return True
        finally:
            if backend is not None:
                opener.close(backend)
        if listed is not None:
            assert listed == docs, f"{file_name} damaged: read as {len(listed)} of {len(docs)} docs"
        assert all(found), f"{file_name} damaged: docs lost without an error"
        return False

    def test_processes_writing_one_store_lose_nothing(self, store_dir):
        self.require("stores_docs", "persistent")
        if self.process_factory is None:
            pytest.skip("set process_factory = 'package.module:callable' to run real processes")
        report = run_processes(self.process_factory, store_dir,
                               docs_per_thread=self.process_docs_per_thread,
                               lock_factory=self.process_lock)
        assert report.ok, report.summary()
