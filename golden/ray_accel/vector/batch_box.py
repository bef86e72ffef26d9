"""The box path over arrays of slots: early cull, box test, de-duplication, sort keys and the
sorting network, for many instructions at once.

The same operations in the same order as the scalar model (:mod:`.box_path`, :mod:`.box_test`,
:mod:`.sort`), on arrays shaped ``(M, S)`` (``M`` instructions, ``S`` child slots) or
``(M, S, 3)`` (per axis), with the FP32 arithmetic of :mod:`.batch_fp` (bit-identical to
:mod:`gpurtl.golden.fp32`). Per-instruction values (ray, descriptor fields) are ``(M,)`` arrays.
"""

import numpy as np

from gpurtl.facts.ray_accel import (
    HEURISTIC_LARGEST_FIRST,
    HEURISTIC_MIDPOINT,
    HEURISTIC_NONE,
    INVALID_NODE,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
)

from ..scalar.sort import NARROW_STAGES, STAGES
from . import batch_fp as F

__all__ = [
    "box_culled",
    "box_test",
    "effective_pointer_flags",
    "maxnum",
    "minnum",
    "sort_enabled",
    "sort_keys",
    "sort_slots",
    "test_slots",
]

_INVALID = np.uint32(INVALID_NODE)
_POS_INF = np.uint32(0x7F800000)
_NEG_INF = np.uint32(0xFF800000)


def effective_pointer_flags(pointer_flags, pointer_flags_en):
    """Pointer flags as the hardware sees them (0 where the descriptor does not enable them)."""
    return np.where(pointer_flags_en != 0, pointer_flags & np.uint32(0x3FF), np.uint32(0))


def box_culled(cull_flags, pointer_flags):
    """Early cull of children by their 4 box flags (``(M, S)``) against the pointer flags
    (``(M,)``); see :func:`.box_path.box_culled`."""
    pf = pointer_flags[:, None]
    flags = cull_flags & np.uint32(0xF)
    forced = (flags & np.uint32(0xC)) | np.where(
        (pf & np.uint32(PF_FORCE_OPAQUE)) != 0, np.uint32(1), np.uint32(2)
    )
    force = (pf & np.uint32(PF_FORCE_OPAQUE | PF_FORCE_NON_OPAQUE)) != 0
    flags = np.where(force, forced, flags)
    return (flags & (pf >> np.uint32(6)) & np.uint32(0xF)) != 0


def maxnum(a, b, *, ftz=False):
    """Larger operand ignoring a NaN operand, the first on ties (:func:`.box_test.maxnum`)."""
    pick_b = F.is_nan(a) | (~F.is_nan(b) & F.lt(a, b, ftz=ftz))
    return np.where(pick_b, b, a)


def minnum(a, b, *, ftz=False):
    """Smaller operand ignoring a NaN operand, the first on ties (:func:`.box_test.minnum`)."""
    pick_b = F.is_nan(a) | (~F.is_nan(b) & F.lt(b, a, ftz=ftz))
    return np.where(pick_b, b, a)


def box_test(origin, inv_dir, extent, bmin, bmax, box_grow, *, ftz=False):
    """Slab test of ``(M, S, 3)`` boxes against ``(M, 3)`` rays (:func:`.box_test.box_test`).

    ``extent`` and ``box_grow`` are ``(M,)``. Returns ``hit``, ``min_t``, ``max_t``,
    ``tmin_raw``, ``tmax_raw`` (NaN replaced by 0 / +inf), each ``(M, S)``.
    """
    o, inv = origin[:, None, :], inv_dir[:, None, :]
    tp_min = F.mul(F.sub(bmin, o, ftz=ftz), inv, ftz=ftz)
    tp_max = F.mul(F.sub(bmax, o, ftz=ftz), inv, ftz=ftz)
    positive = F.le(np.uint32(0), inv, ftz=ftz)  # -0 >= 0 holds; NaN is "negative"
    lo = np.where(positive, tp_min, tp_max)
    hi = np.where(positive, tp_max, tp_min)
    tmin_raw = maxnum(maxnum(lo[..., 0], lo[..., 1], ftz=ftz), lo[..., 2], ftz=ftz)
    tmax_raw = minnum(minnum(hi[..., 0], hi[..., 1], ftz=ftz), hi[..., 2], ftz=ftz)
    min_t = maxnum(tmin_raw, np.uint32(0), ftz=ftz)
    max_t = minnum(tmax_raw, extent[:, None], ftz=ftz)
    tmin_nan, tmax_nan = F.is_nan(tmin_raw), F.is_nan(tmax_raw)
    nan = tmin_nan | tmax_nan
    min_t = np.where(nan, _POS_INF, min_t)
    max_t = np.where(nan, _NEG_INF, max_t)
    grow = (box_grow & np.uint32(0xFF))[:, None]
    grown = np.where(grow == 0, max_t, F.grow(max_t, grow, ftz=ftz))
    hit = ~nan & F.le(min_t, grown, ftz=ftz)
    return {
        "hit": hit,
        "min_t": min_t,
        "max_t": max_t,
        "tmin_raw": np.where(tmin_nan, np.uint32(0), tmin_raw),
        "tmax_raw": np.where(tmax_nan, _POS_INF, tmax_raw),
    }


def sort_keys(heuristic, result, *, ftz=False):
    """Float sort keys ``(M, S)`` by each instruction's heuristic (:func:`.sort.sort_key`)."""
    h = heuristic[:, None]
    keys = result["min_t"]
    if np.any(h == HEURISTIC_LARGEST_FIRST):
        keys = np.where(
            h == HEURISTIC_LARGEST_FIRST, F.sub(result["min_t"], result["max_t"], ftz=ftz), keys
        )
    if np.any(h == HEURISTIC_MIDPOINT):
        keys = np.where(
            h == HEURISTIC_MIDPOINT, F.add(result["tmin_raw"], result["tmax_raw"], ftz=ftz), keys
        )
    return keys


def test_slots(
    ptrs,
    valid,
    bmin,
    bmax,
    culled,
    origin,
    inv_dir,
    extent,
    box_grow,
    heuristic,
    dedup,
    *,
    ftz=False,
):
    """Steps 1-4 of :func:`.box_path.test_slots` for ``(M, S)`` slots.

    ``dedup`` is an ``(M,)`` bool array: which instructions drop a repeated pointer (child
    reuse; BVH8 and filter boxes, not legacy BVH4 nodes). Returns ``(slot_ptrs, keys)``.
    """
    r = box_test(origin, inv_dir, extent, bmin, bmax, box_grow, ftz=ftz)
    tested = np.where(valid & ~culled & r["hit"], ptrs, _INVALID)
    out = tested.copy()
    repeat = tested[:, 1:] == tested[:, :-1]
    out[:, 1:] = np.where(dedup[:, None] & repeat, _INVALID, tested[:, 1:])
    return out, sort_keys(heuristic, r, ftz=ftz)


def sort_enabled(sort_en, heuristic):
    """``(M,)`` bool: the descriptor sorts (``sort_en`` and a heuristic other than 3)."""
    return (sort_en != 0) & (heuristic != HEURISTIC_NONE)


def sort_slots(ptrs, keys, sort_tri_first, wide, enable, *, ftz=False):
    """Pointers ``(M, S)`` reordered by the network (:func:`.sort.sort_slots`).

    ``wide``/``enable``/``sort_tri_first`` are ``(M,)``: rows with ``enable`` false keep their
    order; rows with ``wide`` false stop after the narrow stages. Comparators reaching beyond
    ``S`` slots are skipped (``S = 4``: one 4-wide sort).
    """
    ptrs, keys = ptrs.copy(), keys.copy()
    slots = ptrs.shape[1]
    low = ptrs & np.uint32(7)
    stf = (sort_tri_first != 0)[:, None]
    ext = (4 * (ptrs == _INVALID) + 2 * (stf & (low > 3)) + (stf & (low != 1))).astype(np.int8)
    for number, stage in enumerate(STAGES):
        active = enable if number < len(NARROW_STAGES) else enable & (wide != 0)
        if not np.any(active):
            continue
        for i, j in stage:
            if j >= slots:
                continue
            ei, ej = ext[:, i], ext[:, j]
            swap = active & np.where(ej != ei, ej < ei, F.lt(keys[:, j], keys[:, i], ftz=ftz))
            for a in (ptrs, keys, ext):
                ai, aj = a[:, i].copy(), a[:, j]
                a[:, i] = np.where(swap, aj, ai)
                a[:, j] = np.where(swap, ai, aj)
    return ptrs
