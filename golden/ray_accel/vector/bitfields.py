"""Vectorised bit fields of word arrays: many packed layout values at once.

A *word array* is a ``numpy.ndarray`` of dtype ``uint32`` and shape ``(N, W)``: row ``n`` holds
the flat bits of transaction ``n`` laid out as an Amaranth ``data`` layout, split into
little-endian 32-bit words (word 0 = bits 0..31, ``W = ceil(layout.size / 32)``). The helpers
here find a field's bit offset by walking the layout (so nothing depends on hard-coded offsets)
and read or write one field of every row with a few numpy operations.
"""

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = [
    "FieldWriter",
    "field_span",
    "read_field",
    "read_fields",
    "word_count",
    "write_fields",
]


def word_count(layout):
    """Words per row of ``layout``: ``ceil(layout.size / 32)``."""
    return (data.Layout.cast(layout).size + 31) // 32


def _width(shape):
    if isinstance(shape, data.Layout):
        return shape.size
    return Shape.cast(shape).width


def field_span(layout, *path):
    """``(offset, width)`` in bits of the field named by ``path`` inside ``layout``.

    ``path`` holds structure member names (``str``) and array indices (``int``), e.g.
    ``field_span(INSTR_LAYOUT, "node", 1, 7)`` is dword 7 of the second node.
    """
    shape = data.Layout.cast(layout)
    offset = 0
    for part in path:
        if isinstance(shape, data.ArrayLayout):
            if not isinstance(part, int) or not 0 <= part < shape.length:
                raise IndexError(
                    f"index must be an integer from 0 to {shape.length - 1}, not {part!r}"
                )
            offset += part * _width(shape.elem_shape)
            shape = shape.elem_shape
        elif isinstance(shape, data.Layout):
            field = shape[part]
            offset += field.offset
            shape = field.shape
        else:
            raise KeyError(f"field path {path!r} goes below a scalar field")
        if not isinstance(shape, data.Layout):
            try:
                shape = data.Layout.cast(shape)
            except TypeError:
                pass
    return offset, _width(shape)


def _check(words):
    if not isinstance(words, np.ndarray) or words.dtype != np.uint32 or words.ndim != 2:
        raise ValueError("a word array must be a 2-D numpy array of dtype uint32")


def _runs(offsets):
    """Split bit offsets into runs of consecutive 32-bit strides: ``[(first, count), ...]``."""
    runs = []
    for bit in offsets:
        if runs and bit == runs[-1][0] + 32 * runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([bit, 1])
    return runs


def read_fields(words, offsets, width):
    """Fields of ``width`` (1..32) bits at each bit offset of ``offsets``, for every row.

    Returns a uint32 array of shape ``(N, len(offsets))``. Offsets 32 bits apart (array
    elements) are read with one pair of column slices.
    """
    _check(words)
    if not 1 <= width <= 32:
        raise ValueError(f"`width` must be from 1 to 32, not {width}")
    out = np.empty((words.shape[0], len(offsets)), dtype=np.uint32)
    column = 0
    for first, count in _runs([int(b) for b in offsets]):
        index, shift = first // 32, first % 32
        value = words[:, index : index + count] >> np.uint32(shift)
        if shift + width > 32:
            value = value | (words[:, index + 1 : index + count + 1] << np.uint32(32 - shift))
        if width < 32:
            value = value & np.uint32((1 << width) - 1)
        out[:, column : column + count] = value
        column += count
    return out


def read_field(words, offset, width):
    """One field (``width`` <= 32 bits at bit ``offset``) of every row, as uint32 ``(N,)``."""
    return read_fields(words, [offset], width)[:, 0]


def write_fields(words, offsets, width, values):
    """Overwrite, in place, the fields of ``width`` (1..32) bits at each bit offset of
    ``offsets`` in every row of the uint32 word array ``words`` with ``values``
    (``(N, len(offsets))``); the other bits are kept."""
    _check(words)
    if not 1 <= width <= 32:
        raise ValueError(f"`width` must be from 1 to 32, not {width}")
    values = np.asarray(values).astype(np.uint64).reshape(words.shape[0], len(offsets))
    full = (1 << width) - 1
    for k, bit in enumerate(offsets):
        index, shift = bit // 32, bit % 32
        v = (values[:, k] & np.uint64(full)) << np.uint64(shift)
        low_mask = (full << shift) & 0xFFFFFFFF
        words[:, index] = (words[:, index] & np.uint32(~low_mask & 0xFFFFFFFF)) | (
            v & np.uint64(low_mask)
        ).astype(np.uint32)
        if shift + width > 32:
            high_mask = full >> (32 - shift)
            words[:, index + 1] = (words[:, index + 1] & np.uint32(~high_mask & 0xFFFFFFFF)) | (
                v >> np.uint64(32)
            ).astype(np.uint32)


class FieldWriter:
    """Builds a word array field by field (all other bits zero).

    Parameters
    ----------
    rows : int
    layout : data.Layout
        The layout of each row (sets the word count).
    """

    def __init__(self, rows, layout):
        self._words = word_count(layout)
        self._acc = np.zeros((rows, self._words + 1), dtype=np.uint64)

    def write(self, offset, width, values):
        """OR ``values`` (``(N,)`` or ``(N, K)`` for ``K`` consecutive fields of ``width`` bits)
        into the rows at bit ``offset``."""
        values = np.asarray(values).astype(np.uint64)
        if values.ndim == 1:
            values = values[:, None]
        mask = np.uint64((1 << width) - 1)
        for k in range(values.shape[1]):
            bit = offset + k * width
            index, shift = bit // 32, np.uint64(bit % 32)
            v = (values[:, k] & mask) << shift  # at most 64 bits: width <= 32
            self._acc[:, index] |= v & np.uint64(0xFFFFFFFF)
            self._acc[:, index + 1] |= v >> np.uint64(32)

    def words(self):
        """The finished ``(N, W)`` uint32 word array."""
        return self._acc[:, : self._words].astype(np.uint32)
