"""Closest-hit traversal of built BVHs, counting the work per ray: the independent reference of
the traversal loop.

The package's traversal loop, bit exact and with the LDS stack, is
:func:`gpurtl.golden.bvh.wavefront.steps`; this module is deliberately a different traversal,
for checking it and for what it alone counts: an unbounded stack of node objects, leaves tested
in float64 against the mesh's triangles (not the encoded triangle pairs), and the per-node
counters below (child boxes that passed, rotated nodes, leaves) that the OBB experiment reports
for builders' structures of any width. The tests compare the loop's closest hits with it
(``tests/sim/experiments/traversal/test_traversal.py``) and it with a brute-force test of every
triangle (``tests/golden/bvh/test_bvh.py``).

Two models of the same traversal loop (the driver's loop of ``TraceRay3_1.hlsl`` reduced to its
order: the accelerator returns a node's children sorted -- primitives first, then boxes, each by
entry distance -- the shader visits slot 0 next and stacks the rest; the ray extent passed to the
accelerator is the closest hit so far):

``model="exact"``
    Every box and instance node goes through the bit-exact instruction model
    (:func:`gpurtl.golden.ray_accel.scalar.intersect.image_bvh8_intersect_ray`), including the OBB
    rotation (:mod:`gpurtl.golden.ray_accel.scalar.obb`) and the instance transform
    (:mod:`gpurtl.golden.ray_accel.scalar.instance`). Slow (~20 ms per node): for samples. BVH8 only.
``model="fast"``
    The same decisions in float64 on the node's exact decoded planes, with the ray rotated by the
    bit-exact FP32 OBB/instance transform: for large ray counts. It agrees with the exact model
    except for rays grazing a box plane (the experiment reports the agreement).

Leaves (primitive nodes) are tested with a float64 Moller-Trumbore test on the leaf's triangles
(the triangle path has its own block, ``ray_triangle``; this module counts its work).

Counts per ray (:class:`Counts`): ``box_nodes`` (box nodes visited), ``box_tests`` (valid child
boxes tested in them), ``box_hits`` (child boxes that passed), ``obb_nodes`` (visited box nodes with
a rotation), ``leaves``, ``tri_tests``, ``instances``; plus ``t`` and ``prim`` of the closest hit.
"""

import numpy as np

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.facts.ray_accel import INVALID_OBB
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.scalar import obb as obb_model
from gpurtl.golden.ray_accel.scalar.instance import decode_instance

__all__ = ["Counts", "traverse", "node_planes", "GROW"]

GROW = 6 * 2.0**-24  # gpurt's default box grow of 6 "ULP" (IntersectCommon.hlsl)
_FIELDS = ("box_nodes", "box_tests", "box_hits", "obb_nodes", "leaves", "tri_tests", "instances")


class Counts:
    """Per-ray work counts (numpy int arrays) and the closest hit (``t``, ``prim``, ``inst``)."""

    def __init__(self, n):
        for name in _FIELDS:
            setattr(self, name, np.zeros(n, dtype=np.int64))
        self.t = np.full(n, np.inf)
        self.prim = np.full(n, -1, dtype=np.int64)
        self.inst = np.full(n, -1, dtype=np.int64)

    def mean(self):
        return {name: float(getattr(self, name).mean()) for name in _FIELDS}

    def as_dict(self):
        return {name: getattr(self, name) for name in _FIELDS}


def node_planes(bvh, box):
    """Decoded child planes of an encoded box node: (lo, hi) float64 (k, 3) and the child list."""
    cached = getattr(box, "_planes", None)
    if cached is not None:
        return cached
    from gpurtl.golden.ray_accel.encode import box_node

    k = len(box.children)
    if bvh.encoding == "bvh8":
        dec = box_node.decode_box8(box.dwords)
        ch = dec["children"][:k]
        lo = np.array([[bits_f32(v) for v in c["min"]] for c in ch])
        hi = np.array([[bits_f32(v) for v in c["max"]] for c in ch])
    else:
        lo = box.child_lo[:k].astype(np.float64)
        hi = box.child_hi[:k].astype(np.float64)
    box._planes = (lo, hi)
    return box._planes


def _f32(a):
    return np.asarray(a, dtype=np.uint32).view(np.float32).astype(np.float64)


def _bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def _tri_hit(tris, o, d):
    """Closest float64 Moller-Trumbore hit: (t, index) or (inf, -1)."""
    v0, v1, v2 = tris[:, 0], tris[:, 1], tris[:, 2]
    e1, e2 = v1 - v0, v2 - v0
    p = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, p)
    with np.errstate(all="ignore"):
        inv = 1.0 / det
        s = o - v0
        u = np.einsum("ij,ij->i", s, p) * inv
        q = np.cross(s, e1)
        v = (q @ d) * inv
        t = np.einsum("ij,ij->i", e2, q) * inv
    ok = (np.abs(det) > 1e-30) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    if not ok.any():
        return np.inf, -1
    t = np.where(ok, t, np.inf)
    k = int(np.argmin(t))
    return float(t[k]), k


class _RaySpace:
    """The ray in world space or in one instance's object space, with its OBB-rotated copies
    (FP32 bit patterns, bit-exact through the golden transforms)."""

    def __init__(self, o_bits, d_bits, rotated=None):
        self.o_bits, self.d_bits = np.asarray(o_bits, np.uint32), np.asarray(d_bits, np.uint32)
        self._rot = dict(rotated or {})

    def rotated(self, index):
        if index == INVALID_OBB:
            return self.o_bits, self.d_bits
        if index not in self._rot:
            o, d, _ = obb_model.obb_transform_ray(index, self.o_bits, self.d_bits)
            self._rot[index] = (o, d)
        return self._rot[index]

    def floats(self, index):
        o, d = self.rotated(index)
        return _f32(o), _f32(d)


def _sort_children(ptr_kinds, tnear):
    """Hit children in the accelerator's order: primitives/instances by kind key then distance
    (gpurt ``rtip3_opcode_emulation.hlsl`` sort key with sort_tri_first: triangle pairs 1,
    boxes and instances 3)."""
    keys = [(1 if kind == "leaf" else 3, t) for kind, t in zip(ptr_kinds, tnear)]
    return sorted(range(len(keys)), key=lambda i: keys[i])


def traverse(bvh, origins, dirs, *, model="fast", desc=None, tmax=np.inf, on_node=None):
    """Closest-hit traversal of ``rays`` (float arrays (N, 3)) through ``bvh`` (a BLAS from
    :func:`build_bvh` or a TLAS from :func:`build_tlas`). Returns :class:`Counts`.

    ``on_node(kind, node, ray_dict)`` is called for each node the accelerator is asked to
    intersect (for replaying the same instructions on the RTL).
    """
    if model not in ("fast", "exact"):
        raise ValueError(f"`model` must be 'fast' or 'exact', not {model!r}")
    if model == "exact" and bvh.encoding != "bvh8":
        raise ValueError("the exact model runs BVH8 (RT IP 3.1) nodes only")
    desc = desc or default_desc()
    origins = np.asarray(origins, dtype=np.float32)
    dirs = np.asarray(dirs, dtype=np.float32)
    counts = Counts(len(origins))
    o_bits, d_bits = _bits(origins), _bits(dirs)
    # world-space rays rotated by every OBB index the top structure uses (one vectorized call each)
    pre = {}
    for index in sorted({b.obb for b in bvh.boxes} - {INVALID_OBB}):
        o, d, _ = obb_model.obb_transform_ray(index, o_bits, d_bits)
        pre[index] = (o, d)
    for r in range(len(origins)):
        world = _RaySpace(o_bits[r], d_bits[r], {k: (v[0][r], v[1][r]) for k, v in pre.items()})
        _one_ray(bvh, world, counts, r, model, desc, tmax, on_node)
    return counts


def _one_ray(tlas, world, counts, r, model, desc, tmax, on_node):
    from gpurtl.golden.ray_accel.scalar import intersect

    spaces = {None: world}
    t_hit = float(tmax)
    # stack entries: (bvh, node, space key)
    stack = [(tlas, tlas.root, None)]
    while stack:
        bvh, node, key = stack.pop()
        space = spaces[key]
        if node.kind == "box":
            counts.box_nodes[r] += 1
            counts.box_tests[r] += len(node.children)
            if node.obb != INVALID_OBB:
                counts.obb_nodes[r] += 1
            if model == "exact":
                ray = {
                    "origin": [int(v) for v in space.o_bits],
                    "dir": [int(v) for v in space.d_bits],
                    "extent": f32_bits(t_hit),
                    "instance_mask": 0xFF,
                }
                if on_node is not None:
                    on_node("box", node, ray)
                out = intersect.image_bvh8_intersect_ray(node.ptr, node.dwords, ray, 0, desc)
                order = []
                for p in out["dw"][:8]:
                    if p == 0xFFFFFFFF:
                        continue
                    order.append(bvh.by_offset[(p & ~0xF) << 3])
                counts.box_hits[r] += len(order)
                for child in reversed(order):
                    stack.append((bvh, child, key))
                continue
            if on_node is not None:
                on_node(
                    "box",
                    node,
                    {
                        "origin": [int(v) for v in space.o_bits],
                        "dir": [int(v) for v in space.d_bits],
                        "extent": f32_bits(t_hit),
                        "instance_mask": 0xFF,
                    },
                )
            lo, hi = node_planes(bvh, node)
            o, d = space.floats(node.obb)
            with np.errstate(all="ignore"):
                inv = 1.0 / d
                t1, t2 = (lo - o) * inv, (hi - o) * inv
                tnear = np.fmax.reduce(np.fmin(t1, t2), axis=1)
                tfar = np.fmin.reduce(np.fmax(t1, t2), axis=1)
                bad = np.isnan(np.fmin(t1, t2)).any(axis=1) | np.isnan(np.fmax(t1, t2)).any(axis=1)
            hit = (~bad) & (np.maximum(tnear, 0) <= np.minimum(tfar, t_hit) * (1 + GROW))
            idx = np.nonzero(hit)[0]
            counts.box_hits[r] += len(idx)
            kinds = [node.children[i].kind for i in idx]
            order = _sort_children(kinds, tnear[idx])
            for j in reversed(order):
                stack.append((bvh, node.children[idx[j]], key))
        elif node.kind == "leaf":
            counts.leaves[r] += 1
            counts.tri_tests[r] += len(node.prims)
            o, d = space.floats(INVALID_OBB)
            tris = bvh.mesh.triangles[node.prims].astype(np.float64)
            t, k = _tri_hit(tris, o, d)
            if t < t_hit:
                t_hit = t
                counts.t[r] = t
                counts.prim[r] = int(node.prims[k])
                counts.inst[r] = -1 if key is None else key
        else:  # instance node
            counts.instances[r] += 1
            fields = decode_instance(node.dwords)
            from gpurtl.golden.ray_accel.scalar import instance as inst_model

            ray = {
                "origin": [int(v) for v in space.o_bits],
                "dir": [int(v) for v in space.d_bits],
                "extent": f32_bits(t_hit),
                "instance_mask": 0xFF,
            }
            if on_node is not None:
                on_node("instance", node, ray)
            if model == "exact":
                out = intersect.image_bvh8_intersect_ray(node.ptr, node.dwords, ray, 0, desc)
                dw7, new_o, new_d = out["dw"][7], out["origin"], out["dir"]
            else:
                t = inst_model.instance_transform(node.dwords, ray, 0, desc)
                new_o, new_d = t["origin"], t["dir"]
                dw7 = 0xFFFFFFFF if t["culled"] else _filter_fast(fields, new_o, new_d, t_hit)
            if dw7 & 0xFF == 0xFF:
                continue
            blas, _ = bvh.instances[node.index]
            spaces[node.index] = _RaySpace(new_o, new_d)
            stack.append((blas, blas.root, node.index))


def _filter_fast(fields, o_bits, d_bits, t_hit):
    """Filter box (one BLAS-root child) of an instance node in float64: 0xFFFFFF05 on a hit."""
    from gpurtl.golden.ray_accel.encode import box_node
    from gpurtl.golden.ray_accel.scalar.instance import filter_children

    o, d = _f32(o_bits), _f32(d_bits)
    for c in filter_children(fields):
        if not c["valid"]:
            continue
        lo = np.array(
            [
                bits_f32(v)
                for v in box_node.dequantize(
                    fields["filter_origin"], fields["filter_exp"], c["qmin"]
                )
            ]
        )
        hi = np.array(
            [
                bits_f32(v)
                for v in box_node.dequantize(
                    fields["filter_origin"], fields["filter_exp"], [q + 1 for q in c["qmax"]]
                )
            ]
        )
        with np.errstate(all="ignore"):
            inv = 1.0 / d
            t1, t2 = (lo - o) * inv, (hi - o) * inv
            tnear, tfar = np.nanmax(np.fmin(t1, t2)), np.nanmin(np.fmax(t1, t2))
        if max(tnear, 0) <= min(tfar, t_hit) * (1 + GROW):
            return 0xFFFFFF00 | (c["ptr"] & 0xFF)
    return 0xFFFFFFFF
