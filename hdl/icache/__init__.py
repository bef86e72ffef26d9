"""The instruction cache with kernel-entry, sequential and software prefetch."""

from .icache import ICache, icache_signature

__all__ = ["ICache", "icache_signature"]
