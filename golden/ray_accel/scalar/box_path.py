"""The box path of the intersect instructions: cull, test, de-duplicate and sort the children.

Sources: gpurt ``src/shaders/rtip3_opcode_emulation.hlsl`` (``IntersectNodeBvh8``,
``IntersectNodeBvh4``) and ``QuantizedBVH8BoxNode::Decode`` (child pointers).

Order of operations per child slot (BVH8, gpurt ``IntersectCommon.hlsl`` ``fast_intersect_bbox``):

1. ``valid`` (``i < validChildCount``; legacy nodes: ``ptr != INVALID_NODE``), else the slot is
   ``INVALID_NODE`` (the emulation's NaN bounds force a miss).
2. Early cull, before the box test: the box flags against the pointer flags (:func:`box_culled`)
   and, for RT IP 3.1 nodes only, ``(child_mask & ray.instance_mask) == 0``.
3. Box test (:mod:`.box_test`); a miss gives ``INVALID_NODE``.
4. BVH8 only: child reuse de-duplication, ``out[i] = INVALID_NODE if tested[i] == tested[i-1]``
   where ``tested`` is the slot value after steps 1-3 (so a miss of the first of two children
   sharing a pointer keeps the second). Legacy BVH4 nodes store explicit pointers and are not
   de-duplicated.
5. Sort (:mod:`.sort`) when ``sort_en`` and the heuristic is not 3.

``box_culled`` (inferred: gpurt names ``IsChildEarlyCulled`` in the emulation, its body is not
public): the box flags ONLY_OPAQUE, ONLY_NON_OPAQUE, ONLY_TRIANGLES, ONLY_PROCEDURAL (bits 0..3)
line up with
the pointer flags CULL_OPAQUE, CULL_NON_OPAQUE, SKIP_TRIANGLES, SKIP_PROCEDURAL (bits 6..9); a
child is culled when ``flags & (pointer_flags >> 6)`` is non-zero. FORCE_OPAQUE first makes every
child "only opaque" (bits 1:0 = 01), FORCE_NON_OPAQUE "only non-opaque" (10), since forced geometry
has that opacity whatever the build recorded. FORCE_OPAQUE wins if both are set.
"""

import numpy as np

from gpurtl.facts.ray_accel import (
    HEURISTIC_NONE,
    INVALID_NODE,
    PF_BOX_CULL_SHIFT,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
)

from ..encode import box_node
from . import box_test as bt
from . import sort

__all__ = [
    "box_culled",
    "effective_pointer_flags",
    "test_slots",
    "sort_enabled",
    "bvh8_box_pointers",
    "legacy_box_slots",
    "filter_box_pointers",
    "dedup_slots",
]


def effective_pointer_flags(pointer_flags, desc):
    """Pointer flags as the hardware sees them (0 when ``desc.pointer_flags_en`` is 0)."""
    return int(pointer_flags) & 0x3FF if desc.get("pointer_flags_en", 1) else 0


def box_culled(cull_flags, pointer_flags):
    """Early cull of one child by its 4 box flags against the 10 pointer flags."""
    flags = int(cull_flags) & 0xF
    if pointer_flags & PF_FORCE_OPAQUE:
        flags = (flags & 0xC) | 1
    elif pointer_flags & PF_FORCE_NON_OPAQUE:
        flags = (flags & 0xC) | 2
    return bool(flags & (int(pointer_flags) >> PF_BOX_CULL_SHIFT) & 0xF)


def sort_enabled(desc):
    return bool(desc["sort_en"]) and desc["heuristic"] != HEURISTIC_NONE


def test_slots(ptrs, valid, mins, maxs, culled, ray, inv_dir, desc, *, dedup, ftz=False):
    """Steps 1-4 for N slots. Returns ``(slot_ptrs, keys)`` (keys per ``desc.heuristic``)."""
    n = len(ptrs)
    r = bt.box_test(
        np.asarray(ray["origin"], dtype=np.uint32)[None, :],
        np.asarray(inv_dir, dtype=np.uint32)[None, :],
        ray["extent"],
        np.asarray(mins, dtype=np.uint32).reshape(n, 3),
        np.asarray(maxs, dtype=np.uint32).reshape(n, 3),
        desc["box_grow"],
        ftz=ftz,
    )
    tested = [
        int(p) if (v and not c and h) else INVALID_NODE
        for p, v, c, h in zip(ptrs, valid, culled, r["hit"])
    ]
    out = list(tested)
    if dedup:
        for i in range(1, n):
            if tested[i] == tested[i - 1]:
                out[i] = INVALID_NODE
    keys = sort.sort_key(
        desc["heuristic"], r["min_t"], r["max_t"], r["tmin_raw"], r["tmax_raw"], ftz=ftz
    )
    return out, [int(k) for k in keys]


def bvh8_box_pointers(dwords, ray, pointer_flags, desc, *, inv_dir=None, ftz=False):
    """DW0..7 of a BVH8 quantized box node (the ray already OBB-transformed by the caller)."""
    node = box_node.decode_box8(dwords)
    pf = effective_pointer_flags(pointer_flags, desc)
    if inv_dir is None:
        inv_dir = bt.ray_reciprocal(ray["dir"], ftz=ftz)
    ch = node["children"]
    culled = [
        box_culled(c["cull_flags"], pf) or (c["mask"] & ray["instance_mask"]) == 0 for c in ch
    ]
    ptrs, keys = test_slots(
        [c["ptr"] for c in ch],
        [c["valid"] for c in ch],
        [c["min"] for c in ch],
        [c["max"] for c in ch],
        culled,
        ray,
        inv_dir,
        desc,
        dedup=True,
        ftz=ftz,
    )
    if sort_enabled(desc):
        ptrs = sort.sort_slots(
            ptrs, keys, desc["sort_tri_first"], wide=bool(desc["wide_sort"]), ftz=ftz
        )
    return ptrs


def legacy_box_slots(decoded, ray, pointer_flags, desc, *, inv_dir=None, ftz=False):
    """Tested (unsorted) slot pointers and keys of a decoded legacy BVH4 box node."""
    pf = effective_pointer_flags(pointer_flags, desc)
    if inv_dir is None:
        inv_dir = bt.ray_reciprocal(ray["dir"], ftz=ftz)
    ch = decoded["children"]
    return test_slots(
        [c["ptr"] for c in ch],
        [c["ptr"] != INVALID_NODE for c in ch],
        [c["min"] for c in ch],
        [c["max"] for c in ch],
        [box_culled(c["cull_flags"], pf) for c in ch],
        ray,
        inv_dir,
        desc,
        dedup=False,
        ftz=ftz,
    )


def filter_box_pointers(origin, exp, children, ray, desc, *, ftz=False):
    """The 4 sorted pointers of an instance node's filter box (used by ``instance.py``).

    ``children``: 4 dicts ``ptr, qmin[3], qmax[3], valid`` (``instance.filter_children``). Flags
    and masks are not tested; child reuse is de-duplicated; a 4-wide sort when enabled.
    """
    mins, maxs = [], []
    for c in children:
        if c["valid"]:
            mins.append([int(v) for v in box_node.dequantize(origin, exp, c["qmin"])])
            maxs.append(
                [int(v) for v in box_node.dequantize(origin, exp, [q + 1 for q in c["qmax"]])]
            )
        else:
            mins.append([bt.fp32.CANONICAL_NAN] * 3)
            maxs.append([bt.fp32.CANONICAL_NAN] * 3)
    inv_dir = bt.ray_reciprocal(ray["dir"], ftz=ftz)
    ptrs, keys = test_slots(
        [c["ptr"] for c in children],
        [c["valid"] for c in children],
        mins,
        maxs,
        [False] * len(children),
        ray,
        inv_dir,
        desc,
        dedup=True,
        ftz=ftz,
    )
    if sort_enabled(desc):
        ptrs = sort.sort_slots(ptrs, keys, desc["sort_tri_first"], wide=False, ftz=ftz)
    return ptrs


def dedup_slots(tx):
    """Golden reference of the RTL ``DedupUnit``: ``tx`` = ``slots[8]`` {``ptr``, ``hit``,
    ``key``} and ``dedup``; each slot becomes its pointer when it hit, else ``INVALID_NODE``,
    and with ``dedup`` a slot equal to the one before it becomes ``INVALID_NODE`` (step 4 of the
    module doc string). Returns ``{"slots": [{"ptr", "key"}] * 8}``."""
    tested = [int(s["ptr"]) if s["hit"] else INVALID_NODE for s in tx["slots"]]
    out = list(tested)
    if tx["dedup"]:
        for i in range(1, len(out)):
            if tested[i] == tested[i - 1]:
                out[i] = INVALID_NODE
    return {"slots": [{"ptr": p, "key": int(s["key"])} for p, s in zip(out, tx["slots"])]}
