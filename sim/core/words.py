"""Bit patterns, dictionaries and word arrays: the one place that converts between them.

A word array is a ``numpy.ndarray`` of dtype ``uint32`` and shape ``(N, W)``: row ``n`` is the
packed bits of transaction ``n`` (:func:`gpurtl.sim.core.layouts.pack`) split into little-endian
32-bit words, word 0 = bits 0..31, ``W = words_of(width)`` (at least one word). Batch golden
models, the compiled backend and the sessions exchange transactions in this form; these helpers
convert to and from the bit patterns (ints) and dictionaries of the rest of the harness.
"""

import numpy as np
from amaranth.hdl import Shape

from .layouts import leaves, pack, unpack

__all__ = [
    "columns_from_words",
    "words_from_columns",
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


def _field_words(leaf):
    if leaf.width > 64:
        raise ValueError(f"field `{leaf.path}` must be at most 64 bits wide, not {leaf.width}")
    first, end = leaf.offset // 32, leaf.offset + leaf.width
    # (word, bits of the field below that word's bit 0; negative: the field starts inside it)
    return [(word, word * 32 - leaf.offset) for word in range(first, (end + 31) // 32)]


def columns_from_words(shape, words):
    """Per-field columns of a word array laid out as ``shape``: ``{dotted path: uint64 array}``,
    each the field's raw bits (an enumeration's value, a signed field's two's complement); a
    field wider than 64 bits is a ``(N, words_of(width))`` uint32 array of its bits, word 0 the
    lowest."""
    words = np.asarray(words, dtype=np.uint32)
    if words.ndim != 2 or words.shape[1] != word_count(shape):
        raise ValueError(f"`words` must have shape (N, {word_count(shape)}), not {words.shape}")
    wide = words.astype(np.uint64)
    columns = {}
    for leaf in leaves(shape):
        if leaf.width > 64:
            columns[leaf.path] = _wide_field(wide, leaf)
            continue
        value = np.zeros(len(words), dtype=np.uint64)
        for word, below in _field_words(leaf):
            part = wide[:, word]
            value |= part >> np.uint64(-below) if below < 0 else part << np.uint64(below)
        if leaf.width < 64:
            value &= np.uint64((1 << leaf.width) - 1)
        columns[leaf.path] = value
    return columns


def _wide_field(wide, leaf):
    """The bits of a field wider than 64 bits, as uint32 words of its own (word 0 its lowest)."""
    first, shift = leaf.offset // 32, leaf.offset % 32
    count = words_of(leaf.width)
    # one spare zero word, so that each output word can take its high part from the next word
    padded = np.concatenate([wide, np.zeros((len(wide), 1), dtype=np.uint64)], axis=1)
    low = padded[:, first : first + count]
    high = padded[:, first + 1 : first + count + 1]
    value = ((low >> np.uint64(shift)) | (high << np.uint64(32 - shift))) & np.uint64(0xFFFFFFFF)
    top = leaf.width - 32 * (count - 1)
    value[:, -1] &= np.uint64((1 << top) - 1)
    return value.astype(np.uint32)


def words_from_columns(shape, columns, count):
    """Word array ``(count, W)`` of per-field columns (``{dotted path: integer array}``, each
    field's raw bits) laid out as ``shape``: the inverse of :func:`columns_from_words`.

    Raises :class:`ValueError` naming a missing field, a column of the wrong length or a value
    that does not fit its field (``0 <= value < 2**width``: raw bits, never cut to the width).
    """
    out = np.zeros((count, word_count(shape)), dtype=np.uint64)
    for leaf in leaves(shape):
        if leaf.path not in columns:
            raise ValueError(f"the columns must have the field `{leaf.path}`")
        value = np.asarray(columns[leaf.path])
        if value.shape != (count,):
            raise ValueError(f"column `{leaf.path}` must have shape ({count},), not {value.shape}")
        if value.dtype.kind not in "iu":
            raise ValueError(f"column `{leaf.path}` must hold integers, not {value.dtype}")
        # a value the field cannot hold is an error, never cut to the field's width
        low = value.min(initial=0)
        high = value.max(initial=0)
        if low < 0 or (leaf.width < 64 and int(high) >> leaf.width):
            row = int(np.flatnonzero((value < 0) | (value > (1 << leaf.width) - 1))[0])
            raise ValueError(
                f"column `{leaf.path}` row {row}: {int(value[row])} does not fit {leaf.width} bits"
            )
        value = value.astype(np.uint64)
        for word, below in _field_words(leaf):
            part = value << np.uint64(-below) if below < 0 else value >> np.uint64(below)
            out[:, word] |= part & np.uint64(0xFFFFFFFF)
    return out.astype(np.uint32)
