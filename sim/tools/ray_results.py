"""``gpurtl decode ray``: the 10 result dwords of a ``ray_accel`` instruction in words.

What the dwords mean depends on the node the instruction tested (AMD "RDNA4 Instruction Set
Architecture" guide, ``IMAGE_BVH8_INTERSECT_RAY`` and ``IMAGE_BVH_DUAL_INTERSECT_RAY``; gpurt
``src/shaders/rtip3_opcode_emulation.hlsl``), so the decoder takes the kind from the instruction
(its ``dual`` bit and node pointer type) or from ``node=``:

``box``
    DW0-7: the child pointers, hit children in traversal order (sorted by the descriptor's
    heuristic), then ``0xFFFFFFFF`` for the misses. Decoded: ``hit``, ``children`` in order, each
    with its pointer, node type and byte address (pointer with the type bits cleared, times 8).
``triangles``
    A triangle pair: per triangle ``k``, DW ``4k``: ``t`` (FP32; ``+inf`` for a miss or a culled
    triangle), DW ``4k+1`` / ``4k+2``: the barycentrics I and J with the procedural and non-opaque
    flags in their sign bits, DW ``4k+3``: ``(primitive id << 1) | backface``; DW ``8+k``: ``(geometry
    id << 2) | navigation``. Decoded per triangle: ``hit``, ``t``, ``i``, ``j``, ``backface``,
    ``opaque``, ``procedural``, ``prim_id``, ``geo_id``, ``nav``.
``instance``
    DW2/DW3: the BLAS base pointer, DW6: the user data, DW7: the order of the filter box's four
    children (one byte each), or ``0xFFFFFFFF`` when the instance is culled. Decoded: ``culled``,
    ``blas``, ``user_data``, ``filter_order`` and the transformed ray that comes back.
``dual`` (the dual form on two legacy box nodes)
    DW0-3 and DW4-7: the children of node 0 and node 1 as for ``box``.

A status other than 0 (every dword ``0xFFFFFFFF``) is decoded as ``{"status": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpurtl.facts.fp32 import MAGNITUDE_MASK, POS_INF, SIGN_BIT, bits_f32
from gpurtl.facts.ray_accel import (
    INVALID_NODE,
    LEGACY_TYPE_BOX16,
    LEGACY_TYPE_BOX32,
    NODE_TYPE_BOX8,
    NODE_TYPE_INSTANCE,
    STATUS_BAD_NODE,
    STATUS_NOT_MODELLED,
)

__all__ = ["KINDS", "decode_result", "node_kind"]

#: The node kinds :func:`decode_result` reads.
KINDS = ("box", "triangles", "instance", "dual")

_TRIANGLE_TYPES = (0, 1, 2, 3, 8, 9, 10, 11)


def node_kind(instruction: Mapping[str, Any]) -> str | None:
    """The kind of node a ``ray_accel`` input dictionary tests: one of :data:`KINDS`, or
    ``None`` for a node whose result has no decoded form here (legacy triangles, undefined
    types)."""
    if instruction["dual"]:
        types = [int(p) & 7 for p in instruction["node_ptr"]]
        boxes = (LEGACY_TYPE_BOX16, LEGACY_TYPE_BOX32)
        return "dual" if all(t in boxes for t in types) else None
    node_type = int(instruction["node_ptr"][0]) & 0xF
    if node_type == NODE_TYPE_BOX8:
        return "box"
    if node_type == NODE_TYPE_INSTANCE:
        return "instance"
    if node_type in _TRIANGLE_TYPES:
        return "triangles"
    return None


def _float(bits: int) -> float | str:
    value = bits_f32(int(bits) & 0xFFFFFFFF)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _child(ptr: int) -> dict[str, int]:
    return {"ptr": ptr, "type": ptr & 0xF, "address": (ptr & ~0xF) << 3}


def _children(dwords: list[int]) -> list[dict[str, int]]:
    return [_child(p) for p in dwords if p != INVALID_NODE]


def decode_result(result: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The decoded form (module doc string) of one ``ray_accel`` output dictionary
    (``OUT_LAYOUT``: ``dw``, ``origin``, ``dir``, ``status``) of a node of ``kind``."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {', '.join(KINDS)}, not {kind!r}")
    dw = [int(x) & 0xFFFFFFFF for x in result["dw"]]
    status = int(result["status"])
    if status:
        why = {STATUS_NOT_MODELLED: "not modelled by this build", STATUS_BAD_NODE: "bad node"}
        return {"kind": kind, "hit": False, "status": why.get(status, status)}
    if kind == "box":
        children = _children(dw[:8])
        return {"kind": kind, "hit": bool(children), "children": children}
    if kind == "dual":
        nodes = [_children(dw[:4]), _children(dw[4:8])]
        return {"kind": kind, "hit": any(nodes), "nodes": [{"children": c} for c in nodes]}
    if kind == "instance":
        culled = dw[7] == INVALID_NODE
        return {
            "kind": kind,
            "hit": not culled,
            "culled": culled,
            "blas": dw[2] | (dw[3] << 32),
            "user_data": dw[6],
            "filter_order": [] if culled else [(dw[7] >> (8 * k)) & 0xFF for k in range(4)],
            "origin": [_float(x) for x in result["origin"]],
            "dir": [_float(x) for x in result["dir"]],
        }
    triangles = []
    for k in range(2):
        t_bits, i_bits, j_bits, last = dw[4 * k : 4 * k + 4]
        triangles.append(
            {
                "hit": t_bits != POS_INF,
                "t": _float(t_bits),
                "i": _float(i_bits & MAGNITUDE_MASK),
                "j": _float(j_bits & MAGNITUDE_MASK),
                "backface": bool(last & 1),
                "opaque": not j_bits & SIGN_BIT,
                "procedural": bool(i_bits & SIGN_BIT),
                "prim_id": last >> 1,
                "geo_id": dw[8 + k] >> 2,
                "nav": dw[8 + k] & 3,
            }
        )
    return {"kind": kind, "hit": any(t["hit"] for t in triangles), "triangles": triangles}
