"""middle-agent-keyword-memory: a memory backend that ranks docs by keyword overlap."""

__all__ = ["KeywordBackend", "KeywordOptions"]


def __getattr__(name: str):
    # Lazy: middle loads the plugin module at every command, and the backend imports pydantic.
    if name in __all__:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
