"""Layouts, enumerations and constants of the RDNA 4 (RT IP 3.1) ray accelerator.

Shared by the RTL (:mod:`gpurtl.hdl.ray_accel`) and the golden models
(:mod:`gpurtl.golden.ray_accel`). Sources: AMD "RDNA4 Instruction Set Architecture" guide, section
"Ray Tracing" (``IMAGE_BVH8_INTERSECT_RAY``, ``IMAGE_BVH_DUAL_INTERSECT_RAY``, the T# fields of
the BVH resource descriptor); GPUOpen gpurt ``src/shaders/rtip3_opcode_emulation.hlsl``
(``IntersectNodeBvh8``, ``IntersectNodeBvh4``, ``IntersectHardwareInstanceNode``),
``src/shadersClean/common/gfx12/internalNode.hlsli`` and ``childInfo.hlsl`` (BVH8 node and
ChildInfo), ``src/shadersClean/common/gfx10/BoxNode1_0.hlsli`` (legacy BVH4 box nodes),
``gpurt/gpurtAccelStruct.h`` ``HwInstanceTransformNode`` (instance node); Mesa RADV
``src/amd/vulkan/bvh/README.md`` and ``radv_descriptor_set.c`` (descriptor settings).

Instruction operands
--------------------
``RAY_LAYOUT``
    ``origin[3]``, ``dir[3]``, ``extent`` (FP32 bit patterns) and ``instance_mask`` (8 bits):
    the ray VGPRs of ``image_bvh8_intersect_ray``.
``POINTER_FLAGS_SHAPE``
    ``unsigned(10)``: bits 54..63 of the 64-bit BVH base. Bit ``k`` of the field is base bit
    ``54 + k``; :class:`PointerFlags` names them as fields, the ``PF_*`` constants as masks (the
    API ray flags 0x1..0x200).
``DESC_LAYOUT``
    The T# fields that change the result: ``sort_en`` [63], ``heuristic`` [54:53] (0 closest,
    1 largest-first, 2 closest-midpoint, 3 reserved = no sort), ``sort_tri_first`` [52],
    ``box_grow`` [62:55], ``wide_sort`` [117], ``return_mode`` [120], ``compressed`` [115],
    ``box_node_64b`` [116], ``instance_en`` [118], ``pointer_flags_en`` [119] (when 0 the
    pointer flags are treated as 0). :data:`TSHARP_FIELDS` gives each field's T# bit range.
``NODE_LAYOUT``
    One 128-byte node as 32 little-endian dwords.
``INSTR_LAYOUT`` / ``OUT_LAYOUT``
    One intersect instruction (the ``ray_accel`` block's input) and its result: 10 dwords, the
    returned ray and a status (:data:`STATUS_OK`, :data:`STATUS_NOT_MODELLED`,
    :data:`STATUS_BAD_NODE`).

Node formats (each exactly 1024 bits, the bit order of the 32 little-endian dwords)
---------------------------------------------------------------------------------------
``BOX8_HEADER_LAYOUT``, ``CHILD_INFO_LAYOUT``, ``BOX8_NODE_LAYOUT``
    The RT IP 3.1 quantized BVH8 box node: an 8-dword header (internal and leaf base pointers,
    parent, origin, the three exponent bytes, ``count_minus_1``, the OBB index) and eight 96-bit
    ChildInfo records (12-bit ``qmin``/``qmax`` planes, cull flags, instance mask, child type and
    ``range``).
``INSTANCE_NODE_LAYOUT``
    The instance node: a 3x4 world-to-object matrix, the 64-bit child base, parent, user data and
    mask, and an embedded 4-child filter box (origin, exponents, count, four ChildInfo).
``LEGACY_BOX32_LAYOUT`` / ``LEGACY_BOX16_LAYOUT``
    The legacy BVH4 FP32 (128 B) and FP16 (64 B, upper half unused) box nodes of the dual form.
``PRIMITIVE_HEADER_LAYOUT``
    The 52-bit header of the compressed primitive (triangle-pair) node.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from .fp32 import Float32

__all__ = [
    # instruction operands and result
    "RAY_LAYOUT",
    "POINTER_FLAGS_SHAPE",
    "PointerFlags",
    "DESC_LAYOUT",
    "TSHARP_FIELDS",
    "NODE_DWORDS",
    "NODE_LAYOUT",
    "RESULT_DWORDS",
    "RESULT_LAYOUT",
    "INSTR_LAYOUT",
    "OUT_LAYOUT",
    "STATUS_OK",
    "STATUS_NOT_MODELLED",
    "STATUS_BAD_NODE",
    "FIELD_NOTES",
    # pointer flags and heuristics
    "PF_FORCE_OPAQUE",
    "PF_FORCE_NON_OPAQUE",
    "PF_DISABLE_TRI_CULL",
    "PF_FLIP_FACEDNESS",
    "PF_CULL_BACK",
    "PF_CULL_FRONT",
    "PF_CULL_OPAQUE",
    "PF_CULL_NON_OPAQUE",
    "PF_SKIP_TRIANGLES",
    "PF_SKIP_PROCEDURAL",
    "PF_BOX_CULL_SHIFT",
    "HEURISTIC_CLOSEST",
    "HEURISTIC_LARGEST_FIRST",
    "HEURISTIC_MIDPOINT",
    "HEURISTIC_NONE",
    # node types and pointers
    "NODE_TYPE_BOX8",
    "NODE_TYPE_INSTANCE",
    "TRIANGLE_TYPE_MAX",
    "LEGACY_TYPE_TRI0",
    "LEGACY_TYPE_TRI1",
    "LEGACY_TYPE_BOX16",
    "LEGACY_TYPE_BOX32",
    "LEGACY_TYPE_INSTANCE",
    "LEGACY_TYPE_PROCEDURAL",
    "INVALID_NODE",
    "TERMINAL_NODE",
    "SKIP_0_3",
    "SKIP_4_7",
    "SKIP_0_7",
    "END_SEARCH",
    "ROOT_NODE_PTR",
    "INVALID_OBB",
    "CHILD_RANGE_SHIFT",
    "INSTANCE_UNDEFINED_DW",
    "INSTANCE_ADDRESS_MASK",
    "INSTANCE_AABB_BIT",
    "LEGACY_GEOMETRY_INDEX_DW",
    # node formats
    "QUANT_BITS",
    "CHILD_INFO_LAYOUT",
    "BOX8_HEADER_LAYOUT",
    "BOX8_NODE_LAYOUT",
    "BOX8_CHILDREN",
    "FILTER_CHILDREN",
    "INSTANCE_NODE_LAYOUT",
    "LEGACY_BOX_CHILDREN",
    "LEGACY_BOX32_LAYOUT",
    "LEGACY_BOX16_LAYOUT",
    "PRIMITIVE_HEADER_LAYOUT",
    # box test and sort
    "BOX_GROW_UNIT",
    "box_grow_constant",
    "SORT_STAGES",
    "NARROW_SORT_STAGES",
    "SORT_SLOTS",
]

# --- ray -----------------------------------------------------------------------------------------
RAY_LAYOUT = data.StructLayout(
    {
        "origin": data.ArrayLayout(Float32, 3),
        "dir": data.ArrayLayout(Float32, 3),
        "extent": Float32,
        "instance_mask": unsigned(8),
    }
)

# --- pointer flags: BVH base bits 54..63 = API ray flags 0x1..0x200 -------------------------------
POINTER_FLAGS_SHAPE = unsigned(10)


class PointerFlags(data.Struct):
    """The pointer flags, one field each: field ``k`` is BVH base bit ``54 + k``, the API ray
    flag ``1 << k``. ``PointerFlags(value)`` views a :data:`POINTER_FLAGS_SHAPE` value; the
    ``PF_*`` masks are the same bits as integers."""

    force_opaque: unsigned(1)  # base bit 54
    force_non_opaque: unsigned(1)  # 55
    disable_tri_cull: unsigned(1)  # 56
    flip_facedness: unsigned(1)  # 57
    cull_back: unsigned(1)  # 58
    cull_front: unsigned(1)  # 59
    cull_opaque: unsigned(1)  # 60
    cull_non_opaque: unsigned(1)  # 61
    skip_triangles: unsigned(1)  # 62
    skip_procedural: unsigned(1)  # 63


def _pf_offset(name):
    return data.Layout.cast(PointerFlags)[name].offset


PF_FORCE_OPAQUE = 1 << _pf_offset("force_opaque")
PF_FORCE_NON_OPAQUE = 1 << _pf_offset("force_non_opaque")
PF_DISABLE_TRI_CULL = 1 << _pf_offset("disable_tri_cull")
PF_FLIP_FACEDNESS = 1 << _pf_offset("flip_facedness")
PF_CULL_BACK = 1 << _pf_offset("cull_back")
PF_CULL_FRONT = 1 << _pf_offset("cull_front")
PF_CULL_OPAQUE = 1 << _pf_offset("cull_opaque")
PF_CULL_NON_OPAQUE = 1 << _pf_offset("cull_non_opaque")
PF_SKIP_TRIANGLES = 1 << _pf_offset("skip_triangles")
PF_SKIP_PROCEDURAL = 1 << _pf_offset("skip_procedural")
#: The 4 box flags (only opaque, only non-opaque, only triangles, only procedural) line up with
#: the pointer flags from CULL_OPAQUE on: a child is culled when ``flags & (pf >> 6)``.
PF_BOX_CULL_SHIFT = _pf_offset("cull_opaque")

# --- descriptor (T# of the BVH resource) ----------------------------------------------------------
HEURISTIC_CLOSEST = 0
HEURISTIC_LARGEST_FIRST = 1
HEURISTIC_MIDPOINT = 2
HEURISTIC_NONE = 3  # "reserved" in the ISA guide; the gpurt emulation does not sort then

DESC_LAYOUT = data.StructLayout(
    {
        "sort_en": unsigned(1),
        "heuristic": unsigned(2),
        "sort_tri_first": unsigned(1),
        "box_grow": unsigned(8),
        "wide_sort": unsigned(1),
        "return_mode": unsigned(1),
        "compressed": unsigned(1),
        "box_node_64b": unsigned(1),
        "instance_en": unsigned(1),
        "pointer_flags_en": unsigned(1),
    }
)

#: T# bit position and width of each descriptor field (PAL ``sq_bvh_rsrc_t`` agrees).
TSHARP_FIELDS = {
    "sort_tri_first": (52, 1),
    "heuristic": (53, 2),
    "box_grow": (55, 8),
    "sort_en": (63, 1),
    "compressed": (115, 1),
    "box_node_64b": (116, 1),
    "wide_sort": (117, 1),
    "instance_en": (118, 1),
    "pointer_flags_en": (119, 1),
    "return_mode": (120, 1),
}

# --- nodes, instruction and result ----------------------------------------------------------------
NODE_DWORDS = 32
NODE_LAYOUT = data.ArrayLayout(unsigned(32), NODE_DWORDS)
RESULT_DWORDS = 10
RESULT_LAYOUT = data.ArrayLayout(unsigned(32), RESULT_DWORDS)

#: ``dual`` 0 = image_bvh8_intersect_ray (node_ptr[0], node[0]); 1 = image_bvh_dual_intersect_ray
#: (two legacy-typed pointers and nodes). ``node[k]`` holds the 128 bytes fetched at the pointer
#: (64 B nodes use the first 16 dwords).
INSTR_LAYOUT = data.StructLayout(
    {
        "dual": unsigned(1),
        "ray": RAY_LAYOUT,
        "node_ptr": data.ArrayLayout(unsigned(32), 2),
        "node": data.ArrayLayout(NODE_LAYOUT, 2),
        "pointer_flags": POINTER_FLAGS_SHAPE,
        "desc": DESC_LAYOUT,
    }
)
#: ``dw``: the 10 result dwords; ``origin``/``dir``: the returned ray (changed only by instance
#: nodes); ``status``: see the ``STATUS_*`` constants.
OUT_LAYOUT = data.StructLayout(
    {
        "dw": RESULT_LAYOUT,
        "origin": data.ArrayLayout(Float32, 3),
        "dir": data.ArrayLayout(Float32, 3),
        "status": unsigned(2),
    }
)
STATUS_OK = 0
STATUS_NOT_MODELLED = 1  # a node kind the build leaves out: every dword 0xFFFFFFFF
STATUS_BAD_NODE = 2  # a node type undefined for the instruction: every dword 0xFFFFFFFF

#: What the values of the integer fields of the instruction and its result mean, by field name
#: (``{"in": ..., "out": ...}``, as ``gpurtl list`` and the port tables print them).
_FIELD_NOTES = {
    "heuristic": f"sort heuristic of the descriptor: {HEURISTIC_CLOSEST} closest, "
    f"{HEURISTIC_LARGEST_FIRST} largest first, {HEURISTIC_MIDPOINT} midpoint, {HEURISTIC_NONE} "
    "none (reserved in the ISA guide: no sort)",
    "status": f"{STATUS_OK} ok, {STATUS_NOT_MODELLED} a node kind this build leaves out, "
    f"{STATUS_BAD_NODE} a node type the instruction does not define (both: every dword "
    "0xFFFFFFFF)",
}
FIELD_NOTES = {
    "in": _FIELD_NOTES,
    "out": _FIELD_NOTES
    | {"dw": "the 10 result dwords; `gpurtl decode ray` reads them (hit, child order, t, ids)"},
}

# --- node types (4-bit RT IP 3.1 types; 3-bit legacy types of the dual form) ---------------------
NODE_TYPE_BOX8 = 5  # quantized BVH8 box
NODE_TYPE_INSTANCE = 6
TRIANGLE_TYPE_MAX = 3  # ``(type & 7) <= 3``: a triangle pair (types 0-3 and 8-11)
LEGACY_TYPE_TRI0 = 0
LEGACY_TYPE_TRI1 = 1
LEGACY_TYPE_BOX16 = 4
LEGACY_TYPE_BOX32 = 5
LEGACY_TYPE_INSTANCE = 6
LEGACY_TYPE_PROCEDURAL = 7

INVALID_NODE = 0xFFFFFFFF
TERMINAL_NODE = 0xFFFFFFFE
SKIP_0_3 = 0xFFFFFFFD
SKIP_4_7 = 0xFFFFFFFB
SKIP_0_7 = 0xFFFFFFF9
END_SEARCH = 0xFFFFFFF8
ROOT_NODE_PTR = (128 >> 3) | NODE_TYPE_BOX8  # 0x15: the node at byte 128
INVALID_OBB = 0x7F  # OBB index of an axis-aligned BVH8 node
#: Child pointers advance by ``range << CHILD_RANGE_SHIFT`` (128-byte units of a pointer >> 3).
CHILD_RANGE_SHIFT = 4
#: Result dwords the emulation leaves undefined for an instance node (DW0, DW1, DW4, DW5).
INSTANCE_UNDEFINED_DW = 0xDEADBEEF
#: BLAS address bits of an instance node's child base (``childBasePtr & 0x3FFFFFFFFFFFF8``).
INSTANCE_ADDRESS_MASK = 0x3FFFFFFFFFFFF8
#: Bit of the child base that marks an AABB (procedural) BLAS.
INSTANCE_AABB_BIT = 62
#: Dword of a legacy (RT IP 3.0 layout) triangle node holding the geometry index.
LEGACY_GEOMETRY_INDEX_DW = 14

# --- BVH8 box node --------------------------------------------------------------------------------
QUANT_BITS = 12
BOX8_CHILDREN = 8
FILTER_CHILDREN = 4
LEGACY_BOX_CHILDREN = 4

_F3 = data.ArrayLayout(Float32, 3)

#: One child of a BVH8 node (3 dwords): planes quantized to 12 bits against the node's origin.
CHILD_INFO_LAYOUT = data.StructLayout(
    {
        "qmin_x": unsigned(QUANT_BITS),
        "qmin_y": unsigned(QUANT_BITS),
        "cull_flags": unsigned(4),
        "_reserved": unsigned(4),
        "qmin_z": unsigned(QUANT_BITS),
        "qmax_x": unsigned(QUANT_BITS),
        "mask": unsigned(8),
        "qmax_y": unsigned(QUANT_BITS),
        "qmax_z": unsigned(QUANT_BITS),
        "type": unsigned(4),
        "range": unsigned(4),
    }
)

#: The 8 header dwords of a BVH8 node.
BOX8_HEADER_LAYOUT = data.StructLayout(
    {
        "internal_base": unsigned(32),
        "leaf_base": unsigned(32),
        "parent": unsigned(32),
        "origin": _F3,
        "exp": data.ArrayLayout(unsigned(8), 3),
        "_reserved0": unsigned(1),
        "index_in_parent": unsigned(3),
        "count_minus_1": unsigned(3),
        "_reserved1": unsigned(1),
        "obb_index": unsigned(7),
        "_reserved2": unsigned(25),
    }
)

BOX8_NODE_LAYOUT = data.StructLayout(
    {
        "header": BOX8_HEADER_LAYOUT,
        "children": data.ArrayLayout(CHILD_INFO_LAYOUT, BOX8_CHILDREN),
    }
)

#: The instance node (DW0..11 matrix, DW12..13 child base, DW14 parent, DW15 user data and mask,
#: DW16..31 the filter box).
INSTANCE_NODE_LAYOUT = data.StructLayout(
    {
        "world_to_object": data.ArrayLayout(data.ArrayLayout(Float32, 4), 3),
        "child_base": unsigned(64),
        "parent": unsigned(32),
        "user_data": unsigned(24),
        "mask": unsigned(8),
        "filter_origin": _F3,
        "filter_exp": data.ArrayLayout(unsigned(8), 3),
        "_reserved0": unsigned(4),
        "filter_count_minus_1": unsigned(2),
        "_reserved1": unsigned(2),
        "filter_children": data.ArrayLayout(CHILD_INFO_LAYOUT, FILTER_CHILDREN),
    }
)

#: The legacy FP32 BVH4 box node (128 B): per-child flags are the low 4 bits of the flag bytes;
#: the instance masks and OBB index of DW29..31 are not read.
LEGACY_BOX32_LAYOUT = data.StructLayout(
    {
        "ptr": data.ArrayLayout(unsigned(32), LEGACY_BOX_CHILDREN),
        "bounds": data.ArrayLayout(
            data.StructLayout({"min": _F3, "max": _F3}), LEGACY_BOX_CHILDREN
        ),
        "flags": data.ArrayLayout(unsigned(8), LEGACY_BOX_CHILDREN),
        "_unused": unsigned(96),
    }
)

#: The legacy FP16 BVH4 box node (64 B in the first 16 dwords; no per-child flags).
LEGACY_BOX16_LAYOUT = data.StructLayout(
    {
        "ptr": data.ArrayLayout(unsigned(32), LEGACY_BOX_CHILDREN),
        "bounds": data.ArrayLayout(
            data.StructLayout(
                {"min": data.ArrayLayout(unsigned(16), 3), "max": data.ArrayLayout(unsigned(16), 3)}
            ),
            LEGACY_BOX_CHILDREN,
        ),
        "_unused": unsigned(512),
    }
)

#: The 52-bit header of the compressed primitive node (lengths stored -1 or / 2).
PRIMITIVE_HEADER_LAYOUT = data.StructLayout(
    {
        "payload_x_minus_1": unsigned(5),
        "payload_y_minus_1": unsigned(5),
        "payload_z_minus_1": unsigned(5),
        "trailing_zeros": unsigned(5),
        "geo_anchor_half": unsigned(4),
        "geo_payload_half": unsigned(4),
        "pair_count_minus_1": unsigned(3),
        "vertex_type": unsigned(1),
        "prim_anchor_bits": unsigned(5),
        "prim_payload_bits": unsigned(5),
        "midpoint": unsigned(10),
    }
)

# --- box test and sort ----------------------------------------------------------------------------
BOX_GROW_UNIT = 0x33800000  # 2**-24: ``box_grow`` counts units of this in the T#


def box_grow_constant(box_grow):
    """FP32 pattern of ``box_grow * 2**-24`` (exact; 0 for 0): the factor of the grown far
    distance ``fma(max_t, c, max_t)``."""
    g = int(box_grow) & 0xFF
    if g == 0:
        return 0
    e = g.bit_length() - 1  # g * 2**-24 = 1.m * 2**(e - 24), exact
    return ((127 - 24 + e) << 23) | ((g << (23 - e)) & 0x7FFFFF)


SORT_SLOTS = 8
#: The 19-comparator 8-wide network of ``IntersectNodeBvh8`` (pairs ``(i, j)``, ``i < j``).
SORT_STAGES = (
    ((0, 2), (1, 3), (4, 6), (5, 7)),
    ((0, 1), (2, 3), (4, 5), (6, 7)),
    ((1, 2), (5, 6)),
    ((0, 4), (1, 5), (2, 6), (3, 7)),
    ((2, 4), (3, 5)),
    ((1, 2), (3, 4), (5, 6)),
)
#: The first three stages: two independent 4-wide sorts (``wide_sort = 0``).
NARROW_SORT_STAGES = SORT_STAGES[:3]

for _layout in (BOX8_NODE_LAYOUT, INSTANCE_NODE_LAYOUT, LEGACY_BOX32_LAYOUT, LEGACY_BOX16_LAYOUT):
    assert _layout.size == 32 * NODE_DWORDS, _layout
assert CHILD_INFO_LAYOUT.size == 96 and PRIMITIVE_HEADER_LAYOUT.size == 52
del _layout
