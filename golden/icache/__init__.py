"""Golden model of the instruction cache with kernel-entry, sequential and software prefetch."""

from .model import HIT, MISS, PENDING, ICacheCore, ICacheModel, word_of

__all__ = ["HIT", "PENDING", "MISS", "ICacheCore", "ICacheModel", "word_of"]
