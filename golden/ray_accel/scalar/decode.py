"""Golden reference of the ray accelerator's entry stage (the RTL ``NodeDecode``).

One ``INSTR_LAYOUT`` instruction in, one dictionary of the RTL's decoded layout out, bit for bit:
the fields the later stages read and nothing else. Built from this package's node decoders
(:mod:`.box_node`, :mod:`.instance`) and box-path rules (:mod:`.box_path`); the composition of
the stages is checked against :func:`.intersect.intersect` by the top level's lockstep test.

Fields (see :mod:`gpurtl.hdl.ray_accel.node_decode`):

``base[3]``
    The node origin the slot planes are relative to: the BVH8 header origin, the instance's filter
    origin, or ``-0.0`` for the raw planes of the dual form's legacy box nodes.
``planes[8]``
    ``off_min[3]``, ``off_max[3]``: ``Dq(qmin)`` and ``Dq(qmax + 1)`` of every ChildInfo record
    (also the invalid ones: the slot pointer marks them), or the legacy planes (FP16 widened).
``ptrs[8]``
    The child pointer, or ``INVALID_NODE`` when the slot is not valid or early-culled.
``ray``
    ``origin``, ``dir``, ``extent``.
``control``
    ``status`` (0, 1 not modelled by the build, 2 undefined node type), ``blank`` (dual form with
    an instance node), ``is_instance``, ``is_triangle``, ``dual``, ``dual_triangle`` (bit per
    node), ``sort_enable``, ``sort_wide``, ``sort_tri_first``, ``box_grow``, ``heuristic``.
``obb_index``, ``transform`` {``use_matrix``, ``matrix``}, ``instance`` {``culled``,
``blas_lo``, ``blas_hi``, ``user_data``} (builds with transforms)
    The ray transform's operands and the instance node's own result fields (read from node 0
    whatever its type; ``use_matrix`` only for an instance node that is not culled).
``geometry_index[2]`` (builds with triangles)
    Dword 14 of each node (the legacy triangle node's geometry index).
"""

from gpurtl.facts.fp32 import NEG_ZERO
from gpurtl.facts.ray_accel import (
    FILTER_CHILDREN,
    INVALID_NODE,
    INVALID_OBB,
    LEGACY_GEOMETRY_INDEX_DW,
    LEGACY_TYPE_BOX16,
    LEGACY_TYPE_INSTANCE,
    LEGACY_TYPE_PROCEDURAL,
    LEGACY_TYPE_TRI1,
    NODE_TYPE_BOX8,
    NODE_TYPE_INSTANCE,
    STATUS_BAD_NODE,
    STATUS_NOT_MODELLED,
    STATUS_OK,
    TRIANGLE_TYPE_MAX,
)

from ..encode import box_node
from . import box_path, instance
from .obb import OBB_COUNT

__all__ = ["RAW_PLANE_BASE", "child_fields", "decode"]

RAW_PLANE_BASE = NEG_ZERO  # -0.0: -0 + x == x bit for bit for every non-NaN x


def child_fields(words):
    """The fields of one 3-dword ChildInfo record."""
    w0, w1, w2 = (int(w) & 0xFFFFFFFF for w in words)
    return {
        "qmin": [w0 & 0xFFF, (w0 >> 12) & 0xFFF, w1 & 0xFFF],
        "qmax": [(w1 >> 12) & 0xFFF, w2 & 0xFFF, (w2 >> 12) & 0xFFF],
        "cull_flags": (w0 >> 24) & 0xF,
        "mask": (w1 >> 24) & 0xFF,
        "type": (w2 >> 24) & 0xF,
        "range": (w2 >> 28) & 0xF,
    }


def _status(instr, is_box8, is_inst, is_tri, triangles, transforms):
    desc, node0 = instr["desc"], instr["node"][0]
    if instr["dual"]:
        types = [p & 7 for p in instr["node_ptr"]]
        if LEGACY_TYPE_INSTANCE in types:
            return STATUS_OK
        status = STATUS_OK
        for t in types:
            if LEGACY_TYPE_TRI1 < t < LEGACY_TYPE_BOX16:
                status = STATUS_BAD_NODE
            elif status == STATUS_OK and (
                t == LEGACY_TYPE_PROCEDURAL
                or (t == LEGACY_TYPE_BOX16 and desc["box_node_64b"])
                or (t <= LEGACY_TYPE_TRI1 and not triangles)
            ):
                status = STATUS_NOT_MODELLED
        return status
    if is_box8:
        obb = node0[7] & 0x7F
        if obb == INVALID_OBB:
            return STATUS_OK
        if not transforms:
            return STATUS_NOT_MODELLED
        return STATUS_BAD_NODE if obb >= OBB_COUNT else STATUS_OK
    if is_tri:
        return STATUS_OK if triangles else STATUS_NOT_MODELLED
    if is_inst:
        return STATUS_OK if transforms else STATUS_NOT_MODELLED
    return STATUS_BAD_NODE


def _bvh8_slots(node, is_inst, ray, pf):
    """Planes and pointers of a BVH8 node, or of an instance node's filter box in slots 0-3 (the
    other four slots read the BVH8 ChildInfo positions with the filter's exponents)."""
    d = [int(v) & 0xFFFFFFFF for v in node]
    if is_inst:
        fields = instance.decode_instance(d)
        base, exps, count = fields["filter_origin"], fields["filter_exp"], fields["filter_count"]
        internal, prim = NODE_TYPE_BOX8, 0
    else:
        header = box_node.decode_box8(d)
        base, exps, count = header["origin"], header["exp"], header["count"]
        internal, prim = d[0] | NODE_TYPE_BOX8, d[1]
    planes, ptrs = [], []
    for k in range(8):
        words = (
            d[20 + 3 * k : 23 + 3 * k]
            if is_inst and k < FILTER_CHILDREN
            else d[8 + 3 * k : 11 + 3 * k]
        )
        c = child_fields(words)
        planes.append(
            {
                "off_min": [int(box_node.dequant_offset(exps[a], c["qmin"][a])) for a in range(3)],
                "off_max": [
                    int(box_node.dequant_offset(exps[a], c["qmax"][a] + 1)) for a in range(3)
                ],
            }
        )
        if c["type"] == NODE_TYPE_BOX8:
            ptr = internal
            internal = (internal + (c["range"] << 4)) & 0xFFFFFFFF
        else:
            ptr = prim | c["type"]
            prim = (prim + (c["range"] << 4)) & 0xFFFFFFFF
        valid = k < count and (not is_inst or k < FILTER_CHILDREN)
        culled = not is_inst and (
            box_path.box_culled(c["cull_flags"], pf) or (c["mask"] & ray["instance_mask"]) == 0
        )
        ptrs.append(ptr if valid and not culled else INVALID_NODE)
    return [int(v) for v in base], planes, ptrs


def _legacy_slots(instr, pf):
    planes, ptrs = [], []
    for ptr, node in zip(instr["node_ptr"], instr["node"]):
        if ptr & 7 == LEGACY_TYPE_BOX16:
            decoded = box_node.decode_box4_fp16(node)
        else:
            decoded = box_node.decode_box4_fp32(node)
        for c in decoded["children"]:
            live = c["ptr"] != INVALID_NODE and not box_path.box_culled(c["cull_flags"], pf)
            ptrs.append(c["ptr"] if live else INVALID_NODE)
            planes.append(
                {"off_min": [int(v) for v in c["min"]], "off_max": [int(v) for v in c["max"]]}
            )
    return [RAW_PLANE_BASE] * 3, planes, ptrs


def decode(instr, *, triangles=True, transforms=True):
    """The decoded-instruction dictionary of one ``INSTR_LAYOUT`` instruction."""
    ray, desc, dual = instr["ray"], instr["desc"], bool(instr["dual"])
    pf = box_path.effective_pointer_flags(instr["pointer_flags"], desc)
    node0 = [int(v) & 0xFFFFFFFF for v in instr["node"][0]]
    t8 = instr["node_ptr"][0] & 0xF
    is_box8 = not dual and t8 == NODE_TYPE_BOX8
    is_inst = not dual and t8 == NODE_TYPE_INSTANCE and bool(desc["instance_en"])
    is_tri = not dual and (t8 & 7) <= TRIANGLE_TYPE_MAX
    if dual:
        base, planes, ptrs = _legacy_slots(instr, pf)
    else:
        base, planes, ptrs = _bvh8_slots(node0, is_inst, ray, pf)
    types = [p & 7 for p in instr["node_ptr"]]
    dual_tri = [dual and t <= LEGACY_TYPE_TRI1 for t in types]
    out = {
        "base": base,
        "planes": planes,
        "ptrs": ptrs,
        "ray": {"origin": list(ray["origin"]), "dir": list(ray["dir"]), "extent": ray["extent"]},
        "control": {
            "status": _status(instr, is_box8, is_inst, is_tri, triangles, transforms),
            "blank": int(dual and LEGACY_TYPE_INSTANCE in types),
            "is_instance": int(is_inst),
            "is_triangle": int(is_tri),
            "dual": int(dual),
            "dual_triangle": int(dual_tri[0]) | int(dual_tri[1]) << 1,
            "sort_enable": int(box_path.sort_enabled(desc)),
            "sort_wide": int(bool(desc["wide_sort"]) and not is_inst and not any(dual_tri)),
            "sort_tri_first": int(desc["sort_tri_first"]),
            "box_grow": int(desc["box_grow"]),
            "heuristic": int(desc["heuristic"]),
        },
    }
    if transforms:
        fields = instance.decode_instance(node0)
        culled = instance.instance_culled(
            fields["child_base"], fields["mask"], ray["instance_mask"], pf
        )
        blas = instance.blas_base_pointer(fields["child_base"], pf)
        out["obb_index"] = node0[7] & 0x7F if is_box8 else INVALID_OBB
        out["transform"] = {
            "use_matrix": int(is_inst and not culled),
            "matrix": [list(row) for row in fields["world_to_object"]],
        }
        out["instance"] = {
            "culled": int(culled),
            "blas_lo": blas & 0xFFFFFFFF,
            "blas_hi": blas >> 32,
            "user_data": fields["user_data"],
        }
    if triangles:
        out["geometry_index"] = [
            int(node[LEGACY_GEOMETRY_INDEX_DW]) & 0xFFFFFFFF for node in instr["node"]
        ]
    return out
