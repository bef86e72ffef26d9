"""Bit patterns, dictionaries and word arrays: the one place that converts between them.

A word array is a ``numpy.ndarray`` of dtype ``uint32`` and shape ``(N, W)``: row ``n`` is the
packed bits of transaction ``n`` (:func:`gpurtl.sim.core.layouts.pack`) split into little-endian
32-bit words, word 0 = bits 0..31, ``W = words_of(width)`` (at least one word). Batch golden
models, the compiled backend and the sessions exchange transactions in this form; these helpers
convert to and from the bit patterns (ints) and dictionaries of the rest of the harness.
"""

import numpy as np
from amaranth.hdl import Shape

from .layouts import pack, unpack

__all__ = [
    "dicts_from_words",
    "ints_from_words",
    "width_of",
    "word_count",
    "words_from_dicts",
    "words_from_ints",
    "words_of",
]


def words_of(width):
    """Number of 32-bit words that hold ``width`` bits (at least one)."""
    return max(1, (width + 31) // 32)


def width_of(shape):
    """Bit width of a layout or shape (an int is taken as the width itself)."""
    return shape if isinstance(shape, int) else Shape.cast(shape).width


def word_count(shape):
    """Words per row of a layout (or a width in bits)."""
    return words_of(width_of(shape))


def words_from_ints(shape, values):
    """Word array of the bit patterns ``values`` (ints) of a layout (or a width in bits)."""
    width = word_count(shape)
    raw = b"".join(int(v).to_bytes(4 * width, "little") for v in values)
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32).reshape(-1, width)


def ints_from_words(words):
    """Bit patterns (ints) of the rows of a word array."""
    words = np.ascontiguousarray(np.asarray(words, dtype=np.uint32)).astype("<u4", copy=False)
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
