"""Shared layouts and constants of the ray accelerator (R1 owns this file; R2 and O import it).

Every fact below is from /work/shared/spec/rdna4_ray_accelerator.md (called "the spec"), which
cites AMD gpurt (``GPUOpen-Drivers/gpurt`` 7b226d48, ``src/shaders/rtip3_opcode_emulation.hlsl``,
``src/shadersClean/common/ShaderDefs.hlsli``, ``Common.hlsli``), PAL and Mesa RADV.

Layouts (Amaranth ``data`` layouts, shared by RTL, golden models and tests)
-------------------------------------------------------------------------
``RAY_LAYOUT``
    ``origin[3]``, ``dir[3]``, ``extent`` (FP32 bit patterns) and ``instance_mask`` (8 bits):
    VADDR1..3 of ``image_bvh8_intersect_ray`` (spec 6.1).
``POINTER_FLAGS_SHAPE``
    ``unsigned(10)``: bits 54..63 of the 64-bit BVH base (spec 6.1). Bit ``k`` of the field is
    base bit ``54 + k``; the ``PF_*`` constants name them.
``DESC_LAYOUT``
    The T# (BVH resource descriptor) fields that change the result (spec 6.1, Table 65):
    ``sort_en`` [63], ``heuristic`` [54:53] (0 closest, 1 largest-first, 2 closest-midpoint,
    3 reserved = treated as "no sort"), ``sort_tri_first`` [52], ``box_grow`` [62:55],
    ``wide_sort`` [117], ``return_mode`` [120], ``compressed`` [115], ``box_node_64b`` [116],
    ``instance_en`` [118], ``pointer_flags_en`` [119] (when 0 the pointer flags are ignored, i.e.
    treated as 0: the flags only reach the hardware when the T# enables them).
``NODE_LAYOUT``
    One 128-byte node as 32 little-endian dwords (``unsigned(32)`` each).
``RESULT_LAYOUT``
    The 10 result dwords (spec 6.3-6.5).

Helpers: :func:`desc_from_tsharp`, :func:`tsharp_from_desc`, :func:`pointer_flags_from_base`,
:func:`make_ray`, :func:`node_dwords`, :func:`node_bytes`, and pointer helpers.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data

from gpurtl.facts.fp32 import Float32, f32_bits, bits_f32

__all__ = [
    "RAY_LAYOUT", "POINTER_FLAGS_SHAPE", "DESC_LAYOUT", "NODE_LAYOUT", "NODE_DWORDS",
    "RESULT_LAYOUT", "RESULT_DWORDS",
    "PF_FORCE_OPAQUE", "PF_FORCE_NON_OPAQUE", "PF_DISABLE_TRI_CULL", "PF_FLIP_FACEDNESS",
    "PF_CULL_BACK", "PF_CULL_FRONT", "PF_CULL_OPAQUE", "PF_CULL_NON_OPAQUE",
    "PF_SKIP_TRIANGLES", "PF_SKIP_PROCEDURAL",
    "HEURISTIC_CLOSEST", "HEURISTIC_LARGEST_FIRST", "HEURISTIC_MIDPOINT", "HEURISTIC_NONE",
    "NODE_TYPE_BOX8", "NODE_TYPE_INSTANCE",
    "LEGACY_TYPE_TRI0", "LEGACY_TYPE_TRI1", "LEGACY_TYPE_BOX16", "LEGACY_TYPE_BOX32",
    "LEGACY_TYPE_INSTANCE", "LEGACY_TYPE_PROCEDURAL",
    "INVALID_NODE", "TERMINAL_NODE", "SKIP_0_3", "SKIP_4_7", "SKIP_0_7", "END_SEARCH",
    "ROOT_NODE_PTR", "INVALID_OBB",
    "desc_from_tsharp", "tsharp_from_desc", "pointer_flags_from_base", "default_desc",
    "make_ray", "node_dwords", "node_bytes", "is_triangle_ptr", "pair_index", "node_offset",
    "ptr_type", "ray_floats", "INSTR_LAYOUT", "OUT_LAYOUT",
    "STATUS_OK", "STATUS_NOT_MODELLED", "STATUS_BAD_NODE",
]

# --- ray -----------------------------------------------------------------------------------------
RAY_LAYOUT = data.StructLayout({
    "origin": data.ArrayLayout(Float32(), 3),
    "dir": data.ArrayLayout(Float32(), 3),
    "extent": Float32(),
    "instance_mask": unsigned(8),
})

# --- pointer flags (spec 6.1: BVH base bits 54..63 = API ray flags 0x1..0x200) ---------------------
POINTER_FLAGS_SHAPE = unsigned(10)
PF_FORCE_OPAQUE = 1 << 0        # base bit 54
PF_FORCE_NON_OPAQUE = 1 << 1    # 55
PF_DISABLE_TRI_CULL = 1 << 2    # 56
PF_FLIP_FACEDNESS = 1 << 3      # 57
PF_CULL_BACK = 1 << 4           # 58
PF_CULL_FRONT = 1 << 5          # 59
PF_CULL_OPAQUE = 1 << 6         # 60
PF_CULL_NON_OPAQUE = 1 << 7     # 61
PF_SKIP_TRIANGLES = 1 << 8      # 62
PF_SKIP_PROCEDURAL = 1 << 9     # 63

# --- descriptor (spec 6.1 Table 65) -----------------------------------------------------------------
HEURISTIC_CLOSEST = 0
HEURISTIC_LARGEST_FIRST = 1
HEURISTIC_MIDPOINT = 2
HEURISTIC_NONE = 3   # "reserved" in the ISA; the emulation does not sort then (spec 6.3)

DESC_LAYOUT = data.StructLayout({
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
})

# T# bit position of each descriptor field (spec 6.1 Table 65; PAL sq_bvh_rsrc_t agrees).
_TSHARP_FIELDS = {
    "sort_tri_first": (52, 1), "heuristic": (53, 2), "box_grow": (55, 8), "sort_en": (63, 1),
    "compressed": (115, 1), "box_node_64b": (116, 1), "wide_sort": (117, 1),
    "instance_en": (118, 1), "pointer_flags_en": (119, 1), "return_mode": (120, 1),
}


def desc_from_tsharp(tsharp):
    """``DESC_LAYOUT`` dictionary of a 128-bit T# given as an ``int``."""
    return {name: (tsharp >> lsb) & ((1 << width) - 1)
            for name, (lsb, width) in _TSHARP_FIELDS.items()}


def tsharp_from_desc(desc, *, base_address=0, size=(1 << 42) - 1):
    """128-bit T# (``int``) holding ``desc``, ``base_address`` (VA >> 8) and type 0x8."""
    value = (base_address & ((1 << 40) - 1)) | ((size & ((1 << 42) - 1)) << 64) | (0x8 << 124)
    for name, (lsb, width) in _TSHARP_FIELDS.items():
        value |= (int(desc[name]) & ((1 << width) - 1)) << lsb
    return value


def default_desc(**changes):
    """The descriptor Mesa programs for RT IP 3.1 (spec 6.1 "Driver settings") with gpurt's default
    box grow of 6, updated with ``changes``."""
    desc = {"sort_en": 1, "heuristic": HEURISTIC_CLOSEST, "sort_tri_first": 1, "box_grow": 6,
            "wide_sort": 1, "return_mode": 1, "compressed": 1, "box_node_64b": 0,
            "instance_en": 1, "pointer_flags_en": 1}
    for key in changes:
        if key not in desc:
            raise KeyError(f"unknown descriptor field `{key}`")
    desc.update(changes)
    return desc


def pointer_flags_from_base(base):
    """The 10 pointer flags (bits 54..63) of a 64-bit BVH base address operand."""
    return (base >> 54) & 0x3FF


# --- nodes and pointers (spec 1.1, 4) -------------------------------------------------------------

NODE_DWORDS = 32
NODE_LAYOUT = data.ArrayLayout(unsigned(32), NODE_DWORDS)
RESULT_DWORDS = 10
RESULT_LAYOUT = data.ArrayLayout(unsigned(32), RESULT_DWORDS)

# --- one instruction and its result (the ``ray_accel`` block's transaction) ------------------------
#: ``dual`` 0 = image_bvh8_intersect_ray (node_ptr[0], node[0]); 1 = image_bvh_dual_intersect_ray
#: (two legacy-typed pointers and nodes). ``node[k]`` holds the 128 bytes fetched at the pointer
#: (64 B nodes use the first 16 dwords).
INSTR_LAYOUT = data.StructLayout({
    "dual": unsigned(1),
    "ray": RAY_LAYOUT,
    "node_ptr": data.ArrayLayout(unsigned(32), 2),
    "node": data.ArrayLayout(NODE_LAYOUT, 2),
    "pointer_flags": POINTER_FLAGS_SHAPE,
    "desc": DESC_LAYOUT,
})
#: ``dw``: the 10 result dwords; ``origin``/``dir``: the returned ray (VGPR_A in/out, changed only
#: by instance nodes); ``status``: 0 ok, 1 a node kind this build does not model (all dwords
#: 0xFFFFFFFF), 2 an undefined node type for the instruction (all dwords 0xFFFFFFFF).
OUT_LAYOUT = data.StructLayout({
    "dw": RESULT_LAYOUT,
    "origin": data.ArrayLayout(Float32(), 3),
    "dir": data.ArrayLayout(Float32(), 3),
    "status": unsigned(2),
})
STATUS_OK = 0
STATUS_NOT_MODELLED = 1
STATUS_BAD_NODE = 2

NODE_TYPE_BOX8 = 5          # RT IP 3.1 quantized BVH8 box (types 0-3, 8-11 are triangle pairs)
NODE_TYPE_INSTANCE = 6
LEGACY_TYPE_TRI0 = 0        # legacy (RDNA2/3, dual form) 3-bit types, spec 4
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
ROOT_NODE_PTR = (128 >> 3) | NODE_TYPE_BOX8   # 0x15, spec 1.1
INVALID_OBB = 0x7F


def ptr_type(ptr):
    """The 4-bit RT IP 3.1 node type of a pointer (spec 1.1)."""
    return ptr & 0xF


def is_triangle_ptr(ptr):
    """RT IP 3.1 triangle-pair pointer test ``(ptr & 7) <= 3`` (gpurt ``NodeTypeIsTriangleNode3_1``)."""
    return (ptr & 7) <= 3


def pair_index(ptr):
    """Triangle pair 0..7 of a primitive-node pointer: ``(ptr & 3) | ((ptr & 8) >> 1)``."""
    return (ptr & 3) | ((ptr & 8) >> 1)


def node_offset(ptr):
    """Byte offset of the node a RT IP 3.1 pointer names: ``(ptr & ~0xF) << 3``."""
    return (ptr & ~0xF & 0xFFFFFFFF) << 3


def node_dwords(raw):
    """32 little-endian dwords of 128 node bytes (shorter byte strings are zero-padded)."""
    raw = bytes(raw)
    if len(raw) > 4 * NODE_DWORDS:
        raise ValueError(f"a node has at most 128 bytes, not {len(raw)}")
    raw = raw + bytes(4 * NODE_DWORDS - len(raw))
    return [int.from_bytes(raw[4 * k:4 * k + 4], "little") for k in range(NODE_DWORDS)]


def node_bytes(dwords):
    """128 bytes of a list of 32 dwords."""
    if len(dwords) != NODE_DWORDS:
        raise ValueError(f"a node has 32 dwords, not {len(dwords)}")
    return b"".join(int(d & 0xFFFFFFFF).to_bytes(4, "little") for d in dwords)


def _f32(value):
    return value if isinstance(value, int) else f32_bits(value)


def make_ray(origin, direction, extent=float("inf"), instance_mask=0xFF):
    """``RAY_LAYOUT`` dictionary from Python floats (or uint32 bit patterns)."""
    return {"origin": [_f32(v) for v in origin], "dir": [_f32(v) for v in direction],
            "extent": _f32(extent), "instance_mask": int(instance_mask) & 0xFF}


def ray_floats(ray):
    """``(origin, dir, extent)`` of a ray dictionary as Python floats (for printing/tests)."""
    return ([bits_f32(v) for v in ray["origin"]], [bits_f32(v) for v in ray["dir"]],
            bits_f32(ray["extent"]))
