"""The RT IP 3.1 instance node (type 6): layout, encoder and the instruction's result.

Sources: gpurt ``gpurt/gpurtAccelStruct.h`` ``HwInstanceTransformNode``,
``src/shaders/rtip3_opcode_emulation.hlsl`` ``IntersectHardwareInstanceNode``, Mesa
``src/amd/vulkan/bvh/README.md``; the AMD "RDNA4 Instruction Set Architecture" guide
(``IMAGE_BVH8_INTERSECT_RAY``: pointer flags in bits 54..63 of the BVH base).

Node layout (128 bytes = 32 dwords)
-----------------------------------
====== ===================================================================================
DW      field
====== ===================================================================================
0..11   ``world_to_object`` 3x4 FP32, row-major (rows x', y', z'; column 3 = translation)
12..13  ``child_base`` (u64): BLAS VA >> 3 (address bits [53:3]) and the instance
        pointer flags in bits 54..63; bit 62 set = AABB (procedural) BLAS
14      parent pointer (software only)
15      [23:0] user data, [31:24] instance mask
16..18  filter box origin (FP32 x 3)
19      filter box exponents x/y/z (8 bits each), valid child count - 1 in [29:28]
20..31  4 ChildInfo (3 dwords each, the BVH8 ChildInfo format of gpurt ``gfx12/childInfo.hlsl``)
====== ===================================================================================

What the instruction does (gpurt ``rtip3_opcode_emulation.hlsl`` ``IntersectHardwareInstanceNode``)
------------------------------------
* Cull: ``((DW15 >> 24) & ray.instance_mask) == 0``, or the BLAS geometry type (bit 62 of
  ``child_base``: 0 triangles, 1 AABBs) is skipped by the ray's pointer flags (skip triangles /
  skip procedural).
* Not culled: the ray is transformed and returned (VGPR_A in/out operands):
  ``o'_r = fma(o.x, W_r0, fma(o.y, W_r1, fma(o.z, W_r2, W_r3)))`` and
  ``d'_r = fma(d.x, W_r0, fma(d.y, W_r1, d.z * W_r2))`` (:func:`obb.transform_rows`).
  Culled: the ray is returned unchanged.
* DW2/DW3 = BLAS base pointer: address ``child_base & 0x3FFFFFFFFFFFF8`` with the flags
  ``(inst_flags & (override ? 0x3FC : 0x3FF)) | ray_flags`` in bits 54..63, ``override`` =
  ray flags & (force opaque | force non-opaque).
* DW6 = user data (``DW15 & 0xFFFFFF``).
* DW7 = the low bytes of the 4 sorted child pointers of the embedded filter box, tested against
  the transformed ray: ``c0 & 0xFF | (c1 & 0xFF) << 8 | ...``. The child pointers are decoded as in
  gpurt ``QuantizedBVH8BoxNode::Decode`` with both running offsets starting at 0 (``offset |
  nodeType``), so a box-root hit gives
  ``0xFFFFFF05`` and a primitive-root hit ``0xFFFFFF1N``.
* DW0, DW1, DW4, DW5 are ``0xDEADBEEF`` in the emulation (undefined); DW8/DW9 are ``0xFFFFFFFF``.

Choices where the sources are silent (documented, also used by the RTL)
-----------------------------------------------------------------------
* A culled instance returns DW7 = ``0xFFFFFFFF`` (the emulation still runs the filter box on the
  untransformed ray, which would send the shader into a culled BLAS).
* The filter box is tested with the T#'s ``box_grow``/heuristic, like any box node; the per-child
  instance masks of the filter box are ignored (as in the emulation).
* With ``desc["pointer_flags_en"] == 0`` the ray flags are treated as 0 (the convention of
  ``golden/ray_accel/encode/ray.py``).
"""

import numpy as np

from gpurtl.facts.ray_accel import (
    CHILD_INFO_LAYOUT,
    CHILD_RANGE_SHIFT,
    INSTANCE_AABB_BIT,
    INSTANCE_ADDRESS_MASK,
    INSTANCE_NODE_LAYOUT,
    INSTANCE_UNDEFINED_DW,
    INVALID_NODE,
    NODE_DWORDS,
    NODE_TYPE_BOX8,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
    PF_SKIP_PROCEDURAL,
    PF_SKIP_TRIANGLES,
)

from ..encode.ray import node_dwords
from . import obb

__all__ = [
    "UNDEFINED_DW",
    "ADDRESS_MASK",
    "decode_instance",
    "encode_instance",
    "blas_base_pointer",
    "instance_culled",
    "filter_children",
    "instance_transform",
    "instance_node_result",
]

UNDEFINED_DW = INSTANCE_UNDEFINED_DW
ADDRESS_MASK = INSTANCE_ADDRESS_MASK
_GEOMETRY_AABB_BIT = INSTANCE_AABB_BIT


def _dwords(node):
    if isinstance(node, (bytes, bytearray)):
        return node_dwords(node)
    node = [int(v) & 0xFFFFFFFF for v in node]
    if len(node) != 32:
        raise ValueError(f"an instance node has 32 dwords, not {len(node)}")
    return node


def decode_instance(node):
    """Fields of an instance node (128 bytes or 32 dwords) as a dictionary.

    Keys: ``world_to_object`` (3x4 FP32 bits), ``child_base`` (u64), ``parent``, ``user_data``,
    ``mask``, ``filter_origin`` (3 FP32 bits), ``filter_exp`` (3), ``filter_count`` (1..4),
    ``filter_info`` (4 x 3 dwords).
    """
    dw = _dwords(node)
    return {
        "world_to_object": [dw[4 * r : 4 * r + 4] for r in range(3)],
        "child_base": dw[12] | (dw[13] << 32),
        "parent": dw[14],
        "user_data": dw[15] & 0xFFFFFF,
        "mask": dw[15] >> 24,
        "filter_origin": dw[16:19],
        "filter_exp": [(dw[19] >> (8 * a)) & 0xFF for a in range(3)],
        "filter_count": ((dw[19] >> 28) & 3) + 1,
        "filter_info": [dw[20 + 3 * i : 23 + 3 * i] for i in range(4)],
    }


def encode_instance(
    world_to_object,
    child_base,
    *,
    user_data=0,
    mask=0xFF,
    parent=0,
    filter_origin=(0, 0, 0),
    filter_exp=(0, 0, 0),
    filter_count=1,
    filter_info=None,
):
    """32 dwords of an instance node.

    ``world_to_object`` is 3x4 FP32 bit patterns (ints) or floats; ``child_base`` the 64-bit
    BLAS base operand (VA >> 3 plus instance flags in bits 54..63). ``filter_info`` holds up to
    4 ChildInfos (3 dwords each, e.g. from :func:`.box_node.encode_box8`); missing ones are written invalid
    (``0xFFFFFFFF, 0x00000FFF, 0``, gpurt ``gfx12/childInfo.hlsl``).
    """
    from gpurtl.facts.fp32 import f32_bits

    rows = [
        [v if isinstance(v, (int, np.integer)) else f32_bits(float(v)) for v in row]
        for row in world_to_object
    ]
    if len(rows) != 3 or any(len(r) != 4 for r in rows):
        raise ValueError("`world_to_object` must be 3 rows of 4 values")
    if not 0 <= user_data < (1 << 24):
        raise ValueError(f"`user_data` must fit 24 bits, not {user_data}")
    if not 0 <= mask < 256:
        raise ValueError(f"`mask` must fit 8 bits, not {mask}")
    if not 1 <= filter_count <= 4:
        raise ValueError(f"`filter_count` must be 1..4, not {filter_count}")
    info = [list(c) for c in (filter_info or [])]
    if len(info) > 4:
        raise ValueError("the filter box has at most 4 children")
    info += [[0xFFFFFFFF, 0x00000FFF, 0]] * (4 - len(info))
    children = [
        CHILD_INFO_LAYOUT.from_bits(
            sum((int(w) & 0xFFFFFFFF) << (32 * k) for k, w in enumerate(child))
        )
        for child in info
    ]
    bits = INSTANCE_NODE_LAYOUT.const(
        {
            "world_to_object": [[int(v) & 0xFFFFFFFF for v in row] for row in rows],
            "child_base": child_base & ((1 << 64) - 1),
            "parent": parent & 0xFFFFFFFF,
            "user_data": user_data,
            "mask": mask,
            "filter_origin": [int(v) & 0xFFFFFFFF for v in filter_origin],
            "filter_exp": [int(e) & 0xFF for e in filter_exp],
            "filter_count_minus_1": filter_count - 1,
            "filter_children": children,
        }
    ).as_bits()
    return [(bits >> (32 * k)) & 0xFFFFFFFF for k in range(NODE_DWORDS)]


def _flags(pointer_flags, desc):
    return pointer_flags if desc is None or desc.get("pointer_flags_en", 1) else 0


def blas_base_pointer(child_base, ray_flags):
    """BLAS base operand with merged flags (gpurt ``rtip3_opcode_emulation.hlsl``
    ``IntersectHardwareInstanceNode`` ``GetBlasBaseNodePtr``)."""
    inst_flags = (child_base >> 54) & 0x3FF
    override = ray_flags & (PF_FORCE_OPAQUE | PF_FORCE_NON_OPAQUE)
    merged = (inst_flags & (0x3FC if override else 0x3FF)) | ray_flags
    return (child_base & ADDRESS_MASK) | (merged << 54)


def instance_culled(child_base, mask, ray_mask, ray_flags):
    """True when the instance mask test or the geometry-type skip culls the instance."""
    if (mask & ray_mask) == 0:
        return True
    aabb = (child_base >> _GEOMETRY_AABB_BIT) & 1
    return bool(
        (not aabb and ray_flags & PF_SKIP_TRIANGLES) or (aabb and ray_flags & PF_SKIP_PROCEDURAL)
    )


def filter_children(fields):
    """The 4 filter-box children: list of dicts ``ptr, qmin[3], qmax[3], valid``.

    Pointers follow gpurt ``QuantizedBVH8BoxNode::Decode`` with both running offsets starting at 0;
    children at or after the
    valid count get ``INVALID_NODE``.
    """
    internal = prim = 0
    out = []
    for i, (d0, d1, d2) in enumerate(fields["filter_info"]):
        qmin = [d0 & 0xFFF, (d0 >> 12) & 0xFFF, d1 & 0xFFF]
        qmax = [(d1 >> 12) & 0xFFF, d2 & 0xFFF, (d2 >> 12) & 0xFFF]
        node_type, rng = (d2 >> 24) & 0xF, (d2 >> 28) & 0xF
        valid = i < fields["filter_count"]
        ptr = INVALID_NODE
        if valid:
            if node_type == NODE_TYPE_BOX8:
                ptr = internal | node_type
                internal += rng << CHILD_RANGE_SHIFT
            else:
                ptr = prim | node_type
                prim += rng << CHILD_RANGE_SHIFT
        out.append({"ptr": ptr, "qmin": qmin, "qmax": qmax, "valid": valid})
    return out


def instance_transform(node, ray, pointer_flags, desc=None):
    """Everything of the instance result except the filter-box test (the ``instance_transform``
    block's golden model).

    Returns a dict: ``origin``, ``dir`` (3 FP32 bits each: transformed, or the input if culled),
    ``culled`` (0/1), ``blas_lo``, ``blas_hi`` (DW2, DW3), ``user_data`` (DW6).
    """
    f = decode_instance(node)
    flags = _flags(pointer_flags, desc)
    culled = instance_culled(f["child_base"], f["mask"], ray["instance_mask"], flags)
    if culled:
        o, d = list(ray["origin"]), list(ray["dir"])
    else:
        new_o, new_d = obb.transform_rows(f["world_to_object"], ray["origin"], ray["dir"])
        o, d = [int(v) for v in new_o], [int(v) for v in new_d]
    blas = blas_base_pointer(f["child_base"], flags)
    return {
        "origin": o,
        "dir": d,
        "culled": int(culled),
        "blas_lo": blas & 0xFFFFFFFF,
        "blas_hi": blas >> 32,
        "user_data": f["user_data"],
    }


def instance_node_result(node_bytes, ray, pointer_flags, desc):
    """The instance-node result of ``image_bvh8_intersect_ray``.

    Returns ``(dwords, new_origin, new_dir)``: 10 result dwords (gpurt
    ``rtip3_opcode_emulation.hlsl`` ``IntersectHardwareInstanceNode``) and the returned ray.
    The filter box is tested by the ray accelerator's box test (:mod:`.box_path`) against the
    transformed ray.
    """
    t = instance_transform(node_bytes, ray, pointer_flags, desc)
    dw7 = INVALID_NODE
    if not t["culled"]:
        ptrs = _filter_sorted_pointers(decode_instance(node_bytes), t, ray, desc)
        dw7 = sum((p & 0xFF) << (8 * k) for k, p in enumerate(ptrs[:4]))
    dwords = [
        UNDEFINED_DW,
        UNDEFINED_DW,
        t["blas_lo"],
        t["blas_hi"],
        UNDEFINED_DW,
        UNDEFINED_DW,
        t["user_data"],
        dw7,
        0xFFFFFFFF,
        0xFFFFFFFF,
    ]
    return dwords, t["origin"], t["dir"]


def _filter_sorted_pointers(fields, t, ray, desc):
    """Sorted pointers of the filter box: decoded here, tested and sorted by the box path."""
    from . import box_path

    children = filter_children(fields)
    new_ray = dict(ray, origin=t["origin"], dir=t["dir"])
    return box_path.filter_box_pointers(
        fields["filter_origin"], fields["filter_exp"], children, new_ray, desc
    )
