"""Helpers for graph tests: the real graph, SQLite store and checkpointer, with a scripted LLM and worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from orchestrator.config.settings import Config
from orchestrator.plugin_api import hookimpl
from orchestrator.plugins.manager import PluginRegistry
from orchestrator.running.orchestrator import Orchestrator
from orchestrator.testing import InMemoryBackend
from tickets.model import Ticket


class RecordedBackend(InMemoryBackend):
    """InMemoryBackend whose instances are kept, so tests can read every call memory received."""

    name = "recorded"
    instances: ClassVar[list["RecordedBackend"]] = []
    fail_on: ClassVar[set[str]] = set()  # methods that raise, to test that memory errors are survived

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        RecordedBackend.instances.append(self)

    def retrieve(self, queries, num_to_retrieve):
        if "retrieve" in self.fail_on:
            raise RuntimeError("disk on fire (retrieve)")
        return super().retrieve(queries, num_to_retrieve)

    def index(self, docs):
        if "index" in self.fail_on:
            raise RuntimeError("disk on fire (index)")
        return super().index(docs)

    @classmethod
    def all_calls(cls) -> list[tuple[str, tuple]]:
        return [c for inst in cls.instances for c in inst.calls]


class _TestPlugin:
    @hookimpl
    def register_memory_backends(self, register):
        register(RecordedBackend)


def make_config(tmp_path: Path, *, memory: bool = True, **agent: Any) -> Config:
    data: dict[str, Any] = {
        "state_dir": str(tmp_path / "state"),
        "agent": {"max_turns": 5, "max_cost_usd": 1.0, **agent},
        "memory": {"backend": "recorded", "save_dir": str(tmp_path / "memory") if memory else None},
    }
    return Config(**data, root=tmp_path)


def make_orchestrator(config: Config, llm, worker) -> Orchestrator:
    registry = PluginRegistry(load_entry_points=False, extra_plugins=(_TestPlugin(),))
    return Orchestrator(config, llm=llm, coding_agent=worker, registry=registry)


def add_ticket(orch: Orchestrator, project: Path, tid: str = "t1", title: str = "Add hello",
               description: str = "Create hello.py", project_id: str = "demo") -> Ticket:
    return orch.store.upsert_ticket(Ticket(id=tid, project_id=project_id, title=title,
                                           description=description, project_path=str(project)))
