"""Sort keys and the 19-comparator 8-wide sorting network (gpurt ``rtip3_opcode_emulation.hlsl``
``IntersectNodeBvh8``).

Source: gpurt ``src/shaders/rtip3_opcode_emulation.hlsl`` ``IntersectNodeBvh8``,
``IntersectNodeBvh4``.

* Float key by heuristic: closest ``min_t``; largest-first ``min_t - max_t`` (FP32 sub of the
  clamped, un-grown values); closest-midpoint ``tmin_raw + tmax_raw`` (NaN replaced by 0 / +inf
  beforehand, no halving). Heuristic 3 (reserved) and ``sort_en = 0`` do not sort.
* 3-bit class key compared first:
  ``ext = 4 * invalid + 2 * (stf and (ptr & 7) > 3) + (stf and (ptr & 7) != 1)``, where
  ``invalid`` means the slot holds ``INVALID_NODE`` (a miss, a culled or a dropped duplicate).
* Compare-exchange on slots ``(i, j)``, ``i < j``: ``swap = ext_j < ext_i if ext_j != ext_i else
  key_j < key_i`` (IEEE ``<``; a NaN key never swaps).
* Network: S1 (0,2)(1,3)(4,6)(5,7); S2 (0,1)(2,3)(4,5)(6,7); S3 (1,2)(5,6); S4 (0,4)(1,5)(2,6)(3,7);
  S5 (2,4)(3,5); S6 (1,2)(3,4)(5,6). ``wide = False`` stops after S3: two independent 4-wide sorts
  of slots 0-3 and 4-7 (inferred).
"""

import numpy as np

from gpurtl.facts.ray_accel import (
    HEURISTIC_LARGEST_FIRST,
    HEURISTIC_MIDPOINT,
    INVALID_NODE,
    NARROW_SORT_STAGES,
    SORT_STAGES,
)
from gpurtl.golden import fp32

__all__ = ["STAGES", "NARROW_STAGES", "sort_key", "class_key", "compare_swap", "sort_slots"]

STAGES = SORT_STAGES
NARROW_STAGES = NARROW_SORT_STAGES


def sort_key(heuristic, min_t, max_t, tmin_raw, tmax_raw, *, ftz=False):
    """Float sort key(s) (uint32 patterns) of one heuristic (3 gives the closest key; unused)."""
    if heuristic == HEURISTIC_LARGEST_FIRST:
        return np.asarray(fp32.sub(min_t, max_t, ftz=ftz), dtype=np.uint32)
    if heuristic == HEURISTIC_MIDPOINT:
        return np.asarray(fp32.add(tmin_raw, tmax_raw, ftz=ftz), dtype=np.uint32)
    return np.asarray(min_t, dtype=np.uint32)


def class_key(ptr, sort_tri_first):
    """3-bit class key of one slot pointer."""
    invalid = int(ptr) == INVALID_NODE
    low = int(ptr) & 7
    stf = bool(sort_tri_first)
    return 4 * invalid + 2 * (stf and low > 3) + (stf and low != 1)


def compare_swap(ext_i, key_i, ext_j, key_j, *, ftz=False):
    """True when slot ``j`` (the higher index) must move before slot ``i``."""
    if ext_j != ext_i:
        return ext_j < ext_i
    return bool(fp32.lt(int(key_j), int(key_i), ftz=ftz))


def sort_slots(ptrs, keys, sort_tri_first, *, wide=True, ftz=False):
    """Pointers reordered by the network. ``ptrs``: 8 (or 4, narrow only) uint32 slot pointers;
    ``keys``: their float keys."""
    n = len(ptrs)
    slots = [(class_key(p, sort_tri_first), int(k), int(p)) for p, k in zip(ptrs, keys)]
    stages = STAGES if wide else NARROW_STAGES
    if n == 4 and wide:
        raise ValueError("a wide sort needs 8 slots")
    for stage in stages:
        for i, j in stage:
            if j >= n:
                continue
            ei, ki, _ = slots[i]
            ej, kj, _ = slots[j]
            if compare_swap(ei, ki, ej, kj, ftz=ftz):
                slots[i], slots[j] = slots[j], slots[i]
    return [p for _, _, p in slots]
