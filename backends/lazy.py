"""Lazy package exports for the built-in backends: a name is imported from its module on first use,
so loading the plugin registry (e.g. for `middle --help`) costs no NumPy, FAISS or SciPy."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `names` maps an exported name to its submodule."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f".{names[name]}", package), name)
        raise AttributeError(name)

    return __getattr__
