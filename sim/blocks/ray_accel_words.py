"""Word-array hooks of the ``ray_accel`` block: fast stimulus and the batch golden model.

:func:`stimulus_words` makes millions of instructions in seconds. Encoding real nodes is slow
(about a millisecond each), so it encodes a pool of :data:`POOL` instructions with the block's own
:func:`~gpurtl.sim.blocks.ray_accel.stimulus` (every node kind, the dual form, corner-case rays),
draws the rows from that pool and then varies every drawn row with numpy bit operations, without
breaking the relation between a node and its ray that makes hits likely:

* the direction scaled by a power of two (the same line, other ``t`` values and reciprocals) and
  the origin moved along the ray;
* IEEE corner cases put into direction and origin components (zero, -0, infinities, NaN,
  subnormals, huge values), as the pool's own stimulus does;
* extent, instance mask, pointer flags, descriptor fields and the node pointer's address bits
  redrawn with the pool stimulus's distributions (the pointer's node-type bits are kept).

A fifth of the rows stay exactly as encoded (e.g. triangle rays aimed at shared edges).

:func:`golden_words` is :func:`gpurtl.golden.ray_accel.vector.batch.intersect_words` with the build's
node kinds.
"""

import numpy as np

from gpurtl.facts.fp32 import f32_bits
from gpurtl.facts.ray_accel import INSTR_LAYOUT
from gpurtl.golden.ray_accel.vector.batch import intersect_words
from gpurtl.golden.ray_accel.vector.bitfields import field_span, read_fields, write_fields

from ..core.words import words_from_dicts

__all__ = ["POOL", "golden_words", "stimulus_words"]

#: Instructions encoded per :func:`stimulus_words` call (fewer when ``count`` is smaller).
POOL = 2048

_CORNER = np.array(
    [
        f32_bits(v)
        for v in (
            0.0,
            -0.0,
            float("inf"),
            float("-inf"),
            float("nan"),
            1e-40,
            -1e-42,
            3e38,
            -2e-38,
            1.0,
            -1.0,
        )
    ],
    dtype=np.uint32,
)
_EXTENT_SPECIAL = np.array([f32_bits(v) for v in (0.0, float("nan"), -1.0)], dtype=np.uint32)
_INF = np.uint32(0x7F800000)


def _offsets(*path, count=None):
    if count is None:
        return [field_span(INSTR_LAYOUT, *path)[0]], field_span(INSTR_LAYOUT, *path)[1]
    return [field_span(INSTR_LAYOUT, *path, k)[0] for k in range(count)], 32


class _Fields:
    """Read-modify-write access to one field (or array of fields) of a word array."""

    def __init__(self, words, *path, count=None):
        self.words = words
        self.offsets, self.width = _offsets(*path, count=count)

    def get(self):
        return read_fields(self.words, self.offsets, self.width)

    def set(self, values):
        write_fields(self.words, self.offsets, self.width, values)


def _floats(bits):
    return bits.view(np.float32)


def _vary_rays(rng, words, vary):
    n = words.shape[0]
    origin = _Fields(words, "ray", "origin", count=3)
    direction = _Fields(words, "ray", "dir", count=3)
    o, d = origin.get(), direction.get()
    with np.errstate(all="ignore"):
        scale = vary & (rng.random(n) < 0.4)
        factor = np.ldexp(np.float32(1), rng.integers(-8, 9, n)).astype(np.float32)
        d = np.where(scale[:, None], (_floats(d) * factor[:, None]).view(np.uint32), d)
        shift = vary & (rng.random(n) < 0.3)
        step = rng.uniform(-1.0, 1.0, n).astype(np.float32)
        moved = (_floats(o) + _floats(d) * step[:, None]).view(np.uint32)
        o = np.where(shift[:, None], moved, o)
    corner_d = (vary & (rng.random(n) < 0.06))[:, None] & (rng.random((n, 3)) < 0.5)
    d = np.where(corner_d, _CORNER[rng.integers(0, len(_CORNER), (n, 3))], d)
    corner_o = (vary & (rng.random(n) < 0.03))[:, None] & (
        np.arange(3)[None, :] == rng.integers(0, 3, n)[:, None]
    )
    o = np.where(corner_o, _CORNER[rng.integers(0, len(_CORNER), (n, 3))], o)
    origin.set(o)
    direction.set(d)

    extent = _Fields(words, "ray", "extent")
    roll = rng.random(n)
    finite = (
        (np.abs(rng.normal(size=n)) * np.ldexp(1.0, rng.integers(-2, 8, n)))
        .astype(np.float32)
        .view(np.uint32)
    )
    new = np.where(
        roll < 0.5, _INF, np.where(roll < 0.58, _EXTENT_SPECIAL[rng.integers(0, 3, n)], finite)
    )
    redraw = vary & (rng.random(n) < 0.3)
    extent.set(np.where(redraw, new, extent.get()[:, 0]))
    mask = _Fields(words, "ray", "instance_mask")
    new = np.where(rng.random(n) < 0.7, 0xFF, rng.integers(0, 256, n))
    redraw = vary & (rng.random(n) < 0.3)
    mask.set(np.where(redraw, new, mask.get()[:, 0]))


def _vary_flags(rng, words, vary):
    n = words.shape[0]
    flags = _Fields(words, "pointer_flags")
    new = np.where(rng.random(n) < 0.6, 0, rng.integers(0, 1 << 10, n))
    flags.set(np.where(vary & (rng.random(n) < 0.5), new, flags.get()[:, 0]))
    # the node pointers' address bits; bits 3..0 (node type, pair index) are kept
    ptrs = _Fields(words, "node_ptr", count=2)
    p = ptrs.get()
    address = rng.integers(0, 1 << 28, (n, 2), dtype=np.uint64).astype(np.uint32) << np.uint32(4)
    redraw = (vary & (rng.random(n) < 0.5))[:, None]
    ptrs.set(np.where(redraw, (p & np.uint32(0xF)) | address, p))


def _vary_desc(rng, words, vary):
    """Descriptor fields redrawn with the distributions of the pool stimulus's ``_desc``."""
    n = words.shape[0]
    redraw = vary & (rng.random(n) < 0.5)
    grow_pick = np.array([0, 1, 7, 255], dtype=np.int64)
    grow = np.where(
        rng.random(n) < 0.6,
        6,
        np.where(rng.random(n) < 0.8, grow_pick[rng.integers(0, 4, n)], rng.integers(0, 256, n)),
    )
    new = {
        "sort_en": rng.random(n) < 0.85,
        "heuristic": rng.integers(0, 4, n),
        "sort_tri_first": rng.integers(0, 2, n),
        "box_grow": grow,
        "wide_sort": rng.integers(0, 2, n),
        "return_mode": rng.integers(0, 2, n),
        "box_node_64b": rng.random(n) < 0.1,
        "instance_en": rng.random(n) < 0.8,
        "pointer_flags_en": rng.random(n) < 0.9,
    }
    for name, values in new.items():
        field = _Fields(words, "desc", name)
        field.set(np.where(redraw, values.astype(np.int64), field.get()[:, 0]))


def stimulus_words(stimulus, rng, count, **params):
    """``(count, W_in)`` uint32 word array of random ``INSTR_LAYOUT`` instructions (module doc
    string); ``params`` are the block's build parameters. Up to :data:`POOL` rows are exactly
    ``stimulus(rng, count, **params)`` (the block's own stimulus), packed."""
    if count < 0:
        raise ValueError(f"`count` must be a non-negative integer, not {count}")
    pool = words_from_dicts(INSTR_LAYOUT, stimulus(rng, min(count, POOL), **params))
    if count <= POOL:
        return pool
    words = pool[rng.integers(0, POOL, count)]
    vary = rng.random(count) < 0.8
    _vary_rays(rng, words, vary)
    _vary_flags(rng, words, vary)
    _vary_desc(rng, words, vary)
    return words


def golden_words(words, *, ftz=False, triangles=True, transforms=True, **params):
    """The batch golden model on a word array, restricted to the build's node kinds."""
    from gpurtl.hdl.ray_accel.ray_accel import build_paths

    return intersect_words(words, ftz=ftz, paths=build_paths(triangles, transforms))
