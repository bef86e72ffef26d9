"""Encoders and helpers of the ray accelerator's instruction operands.

The layouts and constants themselves are facts shared with the RTL and live in
:mod:`gpurtl.facts.ray_accel`; this module adds the Python helpers: :func:`desc_from_tsharp`,
:func:`tsharp_from_desc`, :func:`pointer_flags_from_base`, :func:`default_desc` (the descriptor
Mesa RADV programs for RT IP 3.1, ``radv_descriptor_set.c``), :func:`make_ray`,
:func:`node_dwords`, :func:`node_bytes` and the pointer helpers.
"""

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.facts.ray_accel import (
    HEURISTIC_CLOSEST,
    NODE_DWORDS,
    TSHARP_FIELDS,
)

__all__ = [
    "desc_from_tsharp",
    "tsharp_from_desc",
    "pointer_flags_from_base",
    "default_desc",
    "make_ray",
    "node_dwords",
    "node_bytes",
    "is_triangle_ptr",
    "pair_index",
    "node_offset",
    "ptr_type",
    "ray_floats",
]


def desc_from_tsharp(tsharp):
    """``DESC_LAYOUT`` dictionary of a 128-bit T# given as an ``int``."""
    return {
        name: (tsharp >> lsb) & ((1 << width) - 1) for name, (lsb, width) in TSHARP_FIELDS.items()
    }


def tsharp_from_desc(desc, *, base_address=0, size=(1 << 42) - 1):
    """128-bit T# (``int``) holding ``desc``, ``base_address`` (VA >> 8) and type 0x8."""
    value = (base_address & ((1 << 40) - 1)) | ((size & ((1 << 42) - 1)) << 64) | (0x8 << 124)
    for name, (lsb, width) in TSHARP_FIELDS.items():
        value |= (int(desc[name]) & ((1 << width) - 1)) << lsb
    return value


def default_desc(**changes):
    """The descriptor Mesa RADV programs for RT IP 3.1 (``radv_descriptor_set.c``) with gpurt's
    default box grow of 6, updated with ``changes``."""
    desc = {
        "sort_en": 1,
        "heuristic": HEURISTIC_CLOSEST,
        "sort_tri_first": 1,
        "box_grow": 6,
        "wide_sort": 1,
        "return_mode": 1,
        "compressed": 1,
        "box_node_64b": 0,
        "instance_en": 1,
        "pointer_flags_en": 1,
    }
    for key in changes:
        if key not in desc:
            raise KeyError(f"unknown descriptor field `{key}`")
    desc.update(changes)
    return desc


def pointer_flags_from_base(base):
    """The 10 pointer flags (bits 54..63) of a 64-bit BVH base address operand."""
    return (base >> 54) & 0x3FF


def ptr_type(ptr):
    """The 4-bit RT IP 3.1 node type of a pointer."""
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
    return [int.from_bytes(raw[4 * k : 4 * k + 4], "little") for k in range(NODE_DWORDS)]


def node_bytes(dwords):
    """128 bytes of a list of 32 dwords."""
    if len(dwords) != NODE_DWORDS:
        raise ValueError(f"a node has 32 dwords, not {len(dwords)}")
    return b"".join(int(d & 0xFFFFFFFF).to_bytes(4, "little") for d in dwords)


def _f32(value):
    return value if isinstance(value, int) else f32_bits(value)


def make_ray(origin, direction, extent=float("inf"), instance_mask=0xFF):
    """``RAY_LAYOUT`` dictionary from Python floats (or uint32 bit patterns)."""
    return {
        "origin": [_f32(v) for v in origin],
        "dir": [_f32(v) for v in direction],
        "extent": _f32(extent),
        "instance_mask": int(instance_mask) & 0xFF,
    }


def ray_floats(ray):
    """``(origin, dir, extent)`` of a ray dictionary as Python floats (for printing/tests)."""
    return (
        [bits_f32(v) for v in ray["origin"]],
        [bits_f32(v) for v in ray["dir"]],
        bits_f32(ray["extent"]),
    )
