"""Memory hierarchy timing model (L0 -> L1 -> L2 -> Infinity Cache -> DRAM)."""

from .hierarchy import Cache, Hierarchy, HintPolicy, Level

__all__ = ["Cache", "HintPolicy", "Hierarchy", "Level"]
