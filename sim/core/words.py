"""Dictionaries <-> word arrays.

A word array is a ``numpy.ndarray`` of dtype ``uint32`` and shape ``(N, W)``: row ``n`` is the
packed bits of transaction ``n`` (:func:`gpurtl.sim.core.layouts.pack`) split into little-endian 32-bit
words, word 0 = bits 0..31, ``W = ceil(layout.size / 32)``. Batch golden models and compiled
backends exchange transactions in this form; these helpers convert to and from the dictionaries of
the rest of the harness (one row at a time, for tests and small runs).
"""

import numpy as np
from amaranth.lib import data

from .layouts import pack, unpack

__all__ = [
    "dicts_from_words",
    "ints_from_words",
    "word_count",
    "words_from_dicts",
    "words_from_ints",
]


def word_count(layout):
    """Words per row: ``ceil(layout.size / 32)``."""
    return (data.Layout.cast(layout).size + 31) // 32


def words_from_ints(layout, values):
    """Word array of packed integers (one per row)."""
    width = word_count(layout)
    raw = b"".join(int(v).to_bytes(4 * width, "little") for v in values)
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32).reshape(-1, width)


def ints_from_words(words):
    """Packed integers of the rows of a word array."""
    words = np.ascontiguousarray(np.asarray(words, dtype=np.uint32)).astype("<u4")
    return [int.from_bytes(row.tobytes(), "little") for row in words]


def words_from_dicts(layout, dicts):
    """Word array ``(len(dicts), W)`` of dictionaries laid out as ``layout``.

    Raises :class:`gpurtl.sim.core.layouts.LayoutValueError` naming the field of a bad value.
    """
    return words_from_ints(layout, [pack(layout, d) for d in dicts])


def dicts_from_words(layout, words):
    """Dictionaries of the rows of a word array laid out as ``layout``."""
    words = np.asarray(words)
    if words.ndim != 2 or words.shape[1] != word_count(layout):
        raise ValueError(f"`words` must have shape (N, {word_count(layout)}), not {words.shape}")
    return [unpack(layout, value) for value in ints_from_words(words)]
