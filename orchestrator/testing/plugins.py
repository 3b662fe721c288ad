"""Which installed plugins a test loads: none by default in this repo's tests, all when it asks."""

from __future__ import annotations

from typing import Iterator

import pytest

from orchestrator.names import LOAD_PLUGINS_VARIABLE


def use_installed_plugins(monkeypatch: pytest.MonkeyPatch, only: str | None = None) -> None:
    """Load the installed plugins (all, or the comma-separated `only`) for this test, in a fresh
    plugin registry; what they add to `middle` is dropped again when the test ends."""
    if only is None:
        monkeypatch.delenv(LOAD_PLUGINS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(LOAD_PLUGINS_VARIABLE, only)
    fresh_registry(monkeypatch)


def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the process's plugin registry and `middle`'s plugin commands anew for this test."""
    # Imported here: a backend's tests need none of the CLI unless they ask for its plugins.
    from orchestrator.cli import main as cli
    from orchestrator.plugins import manager

    monkeypatch.setattr(manager, "_REGISTRY", None)
    monkeypatch.setattr(cli.MiddleGroup, "_plugins_loaded", False)
    # Plugins add commands to the `middle` group and to `middle memory`: copies keep them apart.
    memory = cli.main._lazy("memory")
    monkeypatch.setattr(cli.main, "commands", dict(cli.main.commands))
    monkeypatch.setattr(memory, "commands", dict(memory.commands))


@pytest.fixture
def installed_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that uses this fixture (or the `installed_plugins` marker) loads every installed plugin."""
    use_installed_plugins(monkeypatch)
    yield
