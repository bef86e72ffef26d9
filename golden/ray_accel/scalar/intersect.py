"""The whole intersect instruction: ``image_bvh8_intersect_ray`` and
``image_bvh_dual_intersect_ray`` (AMD "RDNA4 Instruction Set Architecture" guide, "Ray Tracing"),
one ``INSTR_LAYOUT`` dictionary in, one ``OUT_LAYOUT`` dictionary out
(:mod:`gpurtl.facts.ray_accel`).

Source: gpurt ``src/shaders/rtip3_opcode_emulation.hlsl``.

Dispatch, BVH8 form (4-bit RT IP 3.1 node type of ``node_ptr[0]``, gpurt ``NodePointers.hlsli``):

* 5, box: :func:`.box_path.bvh8_box_pointers` -> DW0..7; DW8/9 = 0 (undefined in the
  sources; this model writes 0). An OBB index other than 0x7F first rotates the ray
  (``obb.obb_transform_ray``, gpurt ``Common.hlsl`` ``OBBTransform``) before the reciprocal;
  indices 104..126 are undefined -> status 2.
* 0-3, 8-11, triangle pair: ``triangle.triangle_pair_eval`` (gpurt ``IntersectTriangle3_1``)
  when that module exists (its ``error``, a misused node, gives status 2); otherwise status 1
  ("not modelled").
* 6, instance: with ``desc.instance_en`` the instance model (gpurt
  ``IntersectHardwareInstanceNode``; the ray is returned transformed):
  ``instance.instance_transform`` plus the filter box through this package's box path (the same as
  ``instance.instance_node_result``, with ``ftz`` passed on); without
  ``instance_en`` status 2.
* 4, 7, 12-15: undefined in RT IP 3.1 -> status 2.

Dual form (legacy 3-bit types of both pointers, gpurt ``gfx10/BoxNode1_0.hlsli``; RDNA4 ISA guide,
``IMAGE_BVH_DUAL_INTERSECT_RAY``):

* 5: FP32 box (128 B); 4: FP16 box (64 B) -- or HPB64 when ``desc.box_node_64b`` (not modelled,
  status 1). Each node gives 4 slots (DW0..3 node 0, DW4..7 node 1); both boxes with ``wide_sort``
  sort all 8 together (the 8-wide network), otherwise each node's 4 slots are sorted 4-wide.
* 0/1 legacy triangle: ``triangle.legacy_triangle_result`` (4 dwords) when present, else
  status 1; DW8/9 = the geometry index of node 0/1's legacy triangle node (0 for box nodes).
* 6: instance: the instance result is a 10-dword form, so two instances (or an instance with
  anything else) give all ``0xFFFFFFFF``, status 0 (RDNA4 ISA guide,
  ``IMAGE_BVH_DUAL_INTERSECT_RAY`` "two instance nodes at once => all
  -1"; the mixed case is inferred). This is checked first.
* 2, 3: undefined legacy types, status 2; 7 (procedural/user node): not modelled, status 1.
  Status 2 wins over status 1.

When ``status != 0`` every result dword is ``0xFFFFFFFF`` and the ray is returned unchanged.
"""

from gpurtl.facts.ray_accel import (
    INVALID_NODE,
    INVALID_OBB,
    LEGACY_TYPE_BOX16,
    LEGACY_TYPE_BOX32,
    LEGACY_TYPE_INSTANCE,
    LEGACY_TYPE_PROCEDURAL,
    LEGACY_TYPE_TRI1,
    NODE_TYPE_BOX8,
    NODE_TYPE_INSTANCE,
    STATUS_BAD_NODE,
    STATUS_NOT_MODELLED,
    STATUS_OK,
)

from ..encode import box_node, primitive_node
from ..encode.ray import node_bytes
from . import box_path, instance, obb, sort, triangle
from . import box_test as bt

__all__ = [
    "intersect",
    "image_bvh8_intersect_ray",
    "image_bvh_dual_intersect_ray",
    "PATHS",
    "IntersectModel",
]


#: the node kinds the model covers; ``paths=`` restricts a call to a subset of them
PATHS = frozenset({"box", "obb", "triangle", "legacy_triangle", "instance"})


def _fail(ray, status):
    return {
        "dw": [INVALID_NODE] * 10,
        "origin": list(ray["origin"]),
        "dir": list(ray["dir"]),
        "status": status,
    }


def _ok(ray, dwords, origin=None, direction=None):
    return {
        "dw": [int(d) & 0xFFFFFFFF for d in dwords],
        "origin": list(origin if origin is not None else ray["origin"]),
        "dir": list(direction if direction is not None else ray["dir"]),
        "status": STATUS_OK,
    }


def image_bvh8_intersect_ray(node_ptr, node, ray, pointer_flags, desc, *, ftz=False, paths=None):
    """Result dictionary (``OUT_LAYOUT``) of ``image_bvh8_intersect_ray`` on one fetched node."""
    paths = PATHS if paths is None else paths
    ntype = node_ptr & 0xF
    if ntype == NODE_TYPE_BOX8:
        obb_index = node[7] & INVALID_OBB
        box_ray = ray
        if obb_index != INVALID_OBB:
            if "obb" not in paths:
                return _fail(ray, STATUS_NOT_MODELLED)
            o, d, bad = obb.obb_transform_ray(obb_index, ray["origin"], ray["dir"])
            if bool(bad):
                return _fail(ray, STATUS_BAD_NODE)
            box_ray = dict(ray, origin=[int(v) for v in o], dir=[int(v) for v in d])
        ptrs = box_path.bvh8_box_pointers(node, box_ray, pointer_flags, desc, ftz=ftz)
        return _ok(ray, ptrs + [0, 0])
    if (ntype & 7) <= 3:
        if "triangle" not in paths:
            return _fail(ray, STATUS_NOT_MODELLED)
        res = triangle.triangle_pair_eval(node_bytes(node), node_ptr, ray, pointer_flags, desc)
        if res["error"]:
            return _fail(ray, STATUS_BAD_NODE)
        return _ok(ray, res["dwords"])
    if ntype == NODE_TYPE_INSTANCE and desc["instance_en"]:
        if "instance" not in paths:
            return _fail(ray, STATUS_NOT_MODELLED)
        return _instance(node, ray, pointer_flags, desc, ftz)
    return _fail(ray, STATUS_BAD_NODE)


def _instance(node, ray, pointer_flags, desc, ftz):
    """The instance model (``instance.instance_transform``) with the filter box tested here, so
    that ``ftz`` reaches the filter's box test (identical to ``instance_node_result`` otherwise)."""
    t = instance.instance_transform(node, ray, pointer_flags, desc)
    dw7 = INVALID_NODE
    if not t["culled"]:
        fields = instance.decode_instance(node)
        new_ray = dict(ray, origin=t["origin"], dir=t["dir"])
        ptrs = box_path.filter_box_pointers(
            fields["filter_origin"],
            fields["filter_exp"],
            instance.filter_children(fields),
            new_ray,
            desc,
            ftz=ftz,
        )
        dw7 = sum((p & 0xFF) << (8 * k) for k, p in enumerate(ptrs[:4]))
    u = instance.UNDEFINED_DW
    dwords = [
        u,
        u,
        t["blas_lo"],
        t["blas_hi"],
        u,
        u,
        t["user_data"],
        dw7,
        INVALID_NODE,
        INVALID_NODE,
    ]
    return _ok(ray, dwords, t["origin"], t["dir"])


def image_bvh_dual_intersect_ray(
    node_ptrs, nodes, ray, pointer_flags, desc, *, ftz=False, paths=None
):
    """Result dictionary (``OUT_LAYOUT``) of ``image_bvh_dual_intersect_ray`` (two legacy nodes)."""
    paths = PATHS if paths is None else paths
    types = [p & 7 for p in node_ptrs]
    if LEGACY_TYPE_INSTANCE in types:
        return _ok(ray, [INVALID_NODE] * 10)
    status = STATUS_OK
    for t in types:
        if LEGACY_TYPE_TRI1 < t < LEGACY_TYPE_BOX16:
            status = STATUS_BAD_NODE
        elif status == STATUS_OK and (
            t == LEGACY_TYPE_PROCEDURAL
            or (t == LEGACY_TYPE_BOX16 and desc["box_node_64b"])
            or (t <= LEGACY_TYPE_TRI1 and "legacy_triangle" not in paths)
        ):
            status = STATUS_NOT_MODELLED
    if status != STATUS_OK:
        return _fail(ray, status)
    inv_dir = bt.ray_reciprocal(ray["dir"], ftz=ftz)
    kinds, slots = [], []
    for ptr, node in zip(node_ptrs, nodes):
        t = ptr & 7
        if t in (LEGACY_TYPE_BOX16, LEGACY_TYPE_BOX32):
            decoded = (
                box_node.decode_box4_fp32(node)
                if t == LEGACY_TYPE_BOX32
                else box_node.decode_box4_fp16(node)
            )
            slots.append(
                box_path.legacy_box_slots(
                    decoded, ray, pointer_flags, desc, inv_dir=inv_dir, ftz=ftz
                )
            )
            kinds.append("box")
        else:
            res = list(
                triangle.legacy_triangle_result(node_bytes(node), ptr, ray, pointer_flags, desc)
            )
            geo_id = primitive_node.decode_legacy_node(node).geometry_index
            slots.append(res[:4] + [geo_id])
            kinds.append("tri")
    dw = []
    geo = []
    if kinds == ["box", "box"] and desc["wide_sort"] and box_path.sort_enabled(desc):
        ptrs = slots[0][0] + slots[1][0]
        keys = slots[0][1] + slots[1][1]
        dw = sort.sort_slots(ptrs, keys, desc["sort_tri_first"], wide=True, ftz=ftz)
        geo = [0, 0]
    else:
        for kind, value in zip(kinds, slots):
            if kind == "box":
                ptrs, keys = value
                if box_path.sort_enabled(desc):
                    ptrs = sort.sort_slots(ptrs, keys, desc["sort_tri_first"], wide=False, ftz=ftz)
                dw += ptrs
                geo.append(0)
            else:
                dw += list(value[:4])
                geo.append(value[4] if len(value) > 4 else 0)
    return _ok(ray, dw + geo)


def intersect(instr, *, ftz=False, paths=None):
    """``OUT_LAYOUT`` dictionary of one ``INSTR_LAYOUT`` dictionary."""
    if instr["dual"]:
        return image_bvh_dual_intersect_ray(
            instr["node_ptr"],
            instr["node"],
            instr["ray"],
            instr["pointer_flags"],
            instr["desc"],
            ftz=ftz,
            paths=paths,
        )
    return image_bvh8_intersect_ray(
        instr["node_ptr"][0],
        instr["node"][0],
        instr["ray"],
        instr["pointer_flags"],
        instr["desc"],
        ftz=ftz,
        paths=paths,
    )


class IntersectModel:
    """Golden model object of the ``ray_accel`` block (callable on one instruction).

    ``paths`` restricts the modelled node kinds to those the RTL build has (others -> status 1).
    """

    def __init__(self, *, ftz=False, paths=None):
        self.ftz = ftz
        self.paths = set(PATHS) if paths is None else set(paths)

    def __call__(self, instr):
        return intersect(instr, ftz=self.ftz, paths=self.paths)
