"""`middle bench` as a Python API: run_retrieval, run_memory and run_scale return the JSON report."""

from .runner import BackendSpec, run_memory, run_retrieval, run_scale

__all__ = ["BackendSpec", "run_retrieval", "run_memory", "run_scale"]
