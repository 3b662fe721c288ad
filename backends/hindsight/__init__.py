"""The hindsight memory backend: retain / recall / reflect over typed facts, in-process and offline."""

from .backend import HindsightBackend
from .options import HindsightOptions

__all__ = ["HindsightBackend", "HindsightOptions"]
