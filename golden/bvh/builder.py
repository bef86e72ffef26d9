"""Binned-SAH BVH builder: BVH8 quantized box nodes with optional OBBs, legacy BVH4, instancing.

Steps
-----
1. :func:`build_binary` -- a binary tree by binned SAH (``bins`` bins on each axis, traversal
   cost 1, triangle cost 1; leaves of at most ``leaf_size`` triangles). Every node also keeps its
   bounds in the rotated space of each of the 104 OBB matrices (``rot_lo``/``rot_hi``, min/max of
   ``M v`` over its vertices, with ``M`` the float32 table matrix), merged bottom up.
2. :func:`collapse` -- a wide tree (8 or 4 children) by repeatedly opening the child with the
   largest surface area.
3. OBB choice per wide box node (gpurt ``src/shaders/RefitOrientedBounds3_1.hlsl`` and
   ``OrientedBoundingBoxes.hlsl``): the candidate rotation with the smallest summed child surface
   area, its boxes padded by ``7.15254e-7 x`` each box's longest extent, is kept only when that
   sum is below ``obb_threshold`` (1.12, gpurt ``OBB_SA_FACTOR_THRESHOLD``) times the summed
   surface area of the axis-aligned child boxes; otherwise the node stores 0x7F. (gpurt picks its
   candidate from a K-DOP and ``MatrixToOBBIndex``; this builder scores all 104 instead.)
4. :func:`encode_bvh8` / :func:`encode_bvh4` -- real node dwords through the node encoders
   (``golden/ray_accel/encode/box_node.py``: ``encode_box8`` -- quantized planes rounded outward, the
   OBB index in DW7 -- and ``encode_box4_fp32``). Memory layout: a 128-byte header, the root box
   at byte 128 (pointer 0x15), box nodes in breadth-first order so that the box children of a node
   are contiguous (``internal_base`` + ``range`` 1 each), leaves after all box nodes, contiguous
   per parent (``leaf_base``). Box children come first in a node, leaves after them.

Leaves: BVH8 leaves (at most ``leaf_size`` <= 4 triangles) become compressed primitive nodes through
the primitive-node packer (``golden/ray_accel/encode/primitive_node.py`` ``pack_triangles``; the child's
``range`` is the number of 128-byte nodes, child type 0 = pair 0); BVH4 leaves are legacy 64-byte
triangle nodes (one triangle, type 0). ``Leaf.prims`` keeps the triangle indices for the traversal
models.

Instancing: :func:`build_tlas` turns ``(blas, object_to_world 3x4)`` pairs into a BVH8 over
instance nodes (type 6), each with the world-to-object matrix (float32 inverse), the BLAS base
pointer and a one-child filter box holding the BLAS root bounds (child type 5, range 0).
"""

import numpy as np

from gpurtl.facts.obb import OBB_COUNT
from gpurtl.facts.ray_accel import INVALID_OBB
from gpurtl.golden.ray_accel.scalar import obb as obb_model

__all__ = [
    "OBB_MATRICES",
    "OBB_THRESHOLD",
    "OBB_PAD",
    "BinNode",
    "BoxNode",
    "Leaf",
    "InstanceLeaf",
    "Bvh",
    "build_binary",
    "collapse",
    "build_bvh",
    "build_tlas",
    "surface_area",
    "encode_bvh8",
    "encode_bvh4",
    "encode_boxes4",
    "place_box8",
    "to_f32_outward",
]

OBB_THRESHOLD = 1.12
OBB_PAD = 7.15254e-7
# float32 table matrices as float64 (the rotation the hardware applies), shape (104, 3, 3)
OBB_MATRICES = np.array([obb_model.obb_matrix(i) for i in range(OBB_COUNT)], dtype=np.float64)


def surface_area(lo, hi):
    """Surface area of boxes (..., 3) (0 for empty/inverted boxes)."""
    e = np.maximum(np.asarray(hi) - np.asarray(lo), 0.0)
    return 2.0 * (e[..., 0] * e[..., 1] + e[..., 1] * e[..., 2] + e[..., 2] * e[..., 0])


def to_f32_outward(lo, hi):
    """float32 boxes containing float64 boxes (min rounded down, max up)."""
    lo32 = np.asarray(lo, dtype=np.float64).astype(np.float32)
    hi32 = np.asarray(hi, dtype=np.float64).astype(np.float32)
    lo32 = np.where(lo32.astype(np.float64) > lo, np.nextafter(lo32, np.float32(-np.inf)), lo32)
    hi32 = np.where(hi32.astype(np.float64) < hi, np.nextafter(hi32, np.float32(np.inf)), hi32)
    return lo32, hi32


class BinNode:
    """Binary build node: ``lo``/``hi`` (world), ``rot_lo``/``rot_hi`` (104 x 3), ``left``/``right``
    or ``prims`` (triangle or instance indices) for leaves."""

    __slots__ = ("lo", "hi", "rot_lo", "rot_hi", "left", "right", "prims")

    def __init__(self, lo, hi, rot_lo, rot_hi, left=None, right=None, prims=None):
        self.lo, self.hi, self.rot_lo, self.rot_hi = lo, hi, rot_lo, rot_hi
        self.left, self.right, self.prims = left, right, prims

    @property
    def is_leaf(self):
        return self.prims is not None


class Leaf:
    """Wide-tree leaf: ``prims`` (triangle indices), ``lo``/``hi`` world bounds."""

    kind = "leaf"

    def __init__(self, prims, lo, hi, rot_lo=None, rot_hi=None):
        self.prims, self.lo, self.hi = np.asarray(prims), lo, hi
        self.rot_lo, self.rot_hi = rot_lo, rot_hi
        self.ptr = None
        self.dwords = None


class InstanceLeaf:
    """TLAS leaf: one instance (``index`` into the scene's instance list)."""

    kind = "instance"

    def __init__(self, index, lo, hi, rot_lo=None, rot_hi=None):
        self.index, self.lo, self.hi = index, lo, hi
        self.rot_lo, self.rot_hi = rot_lo, rot_hi
        self.ptr = None
        self.dwords = None


class BoxNode:
    """Wide box node: ``children``; ``obb`` (0x7F or 0..103); ``child_lo``/``child_hi``: float32
    child boxes in the node's (rotated) space as written to the encoder; ``dwords`` once encoded."""

    kind = "box"

    def __init__(self, children, lo, hi, rot_lo=None, rot_hi=None):
        self.children, self.lo, self.hi = children, lo, hi
        self.rot_lo, self.rot_hi = rot_lo, rot_hi
        self.obb = INVALID_OBB
        self.child_lo = self.child_hi = None
        self.aabb_sa = self.obb_sa = None
        self.ptr = None
        self.dwords = None


def _rotated_bounds(points):
    """(104, 3) min and max of ``M p`` over points (n, 3)."""
    r = np.einsum("kij,nj->kni", OBB_MATRICES, points)
    return r.min(axis=1), r.max(axis=1)


def build_binary(prim_lo, prim_hi, prim_points, *, leaf_size=4, bins=16, with_obb=True):
    """Binned-SAH binary tree over primitives given by their boxes.

    ``prim_points(indices) -> (n, 3)`` gives the points whose rotated bounds make the OBBs.
    """
    prim_lo = np.asarray(prim_lo, dtype=np.float64)
    prim_hi = np.asarray(prim_hi, dtype=np.float64)
    centroid = 0.5 * (prim_lo + prim_hi)

    def make_leaf(idx):
        lo, hi = prim_lo[idx].min(axis=0), prim_hi[idx].max(axis=0)
        rl = rh = None
        if with_obb:
            rl, rh = _rotated_bounds(prim_points(idx))
        return BinNode(lo, hi, rl, rh, prims=idx)

    def build(idx):
        n = len(idx)
        if n <= leaf_size:
            return make_leaf(idx)
        c = centroid[idx]
        cmin, cmax = c.min(axis=0), c.max(axis=0)
        best = (np.inf, None, None)
        lo_all, hi_all = prim_lo[idx], prim_hi[idx]
        for axis in range(3):
            span = cmax[axis] - cmin[axis]
            if span <= 0:
                continue
            b = np.minimum(((c[:, axis] - cmin[axis]) / span * bins).astype(int), bins - 1)
            counts = np.bincount(b, minlength=bins)
            blo = np.full((bins, 3), np.inf)
            bhi = np.full((bins, 3), -np.inf)
            np.minimum.at(blo, b, lo_all)
            np.maximum.at(bhi, b, hi_all)
            left_lo = np.minimum.accumulate(blo, axis=0)
            left_hi = np.maximum.accumulate(bhi, axis=0)
            right_lo = np.minimum.accumulate(blo[::-1], axis=0)[::-1]
            right_hi = np.maximum.accumulate(bhi[::-1], axis=0)[::-1]
            nl = np.cumsum(counts)
            cost = surface_area(left_lo[:-1], left_hi[:-1]) * nl[:-1] + surface_area(
                right_lo[1:], right_hi[1:]
            ) * (n - nl[:-1])
            cost = np.where((nl[:-1] > 0) & (nl[:-1] < n), cost, np.inf)
            k = int(np.argmin(cost))
            if cost[k] < best[0]:
                best = (cost[k], axis, b <= k)
        if best[1] is None:  # all centroids equal: split by index
            mask = np.arange(n) < n // 2
        else:
            mask = best[2]
        left, right = build(idx[mask]), build(idx[~mask])
        rl = rh = None
        if with_obb:
            rl, rh = np.minimum(left.rot_lo, right.rot_lo), np.maximum(left.rot_hi, right.rot_hi)
        return BinNode(
            np.minimum(left.lo, right.lo), np.maximum(left.hi, right.hi), rl, rh, left, right
        )

    return build(np.arange(len(prim_lo)))


def collapse(node, width, leaf_factory):
    """Wide tree of ``width`` children per box node from a binary tree."""
    if node.is_leaf:
        # a lone leaf still needs a box node above it (the root)
        return BoxNode([leaf_factory(node)], node.lo, node.hi, node.rot_lo, node.rot_hi)
    kids = [node.left, node.right]
    while len(kids) < width:
        inner = [k for k in kids if not k.is_leaf]
        if not inner:
            break
        big = max(inner, key=lambda k: surface_area(k.lo, k.hi))
        kids.remove(big)
        kids += [big.left, big.right]
    children = [leaf_factory(k) if k.is_leaf else collapse(k, width, leaf_factory) for k in kids]
    # boxes first, leaves after (gpurt order)
    children.sort(key=lambda c: 0 if c.kind == "box" else 1)
    return BoxNode(children, node.lo, node.hi, node.rot_lo, node.rot_hi)


def _choose_obb(box, obb_threshold):
    """Set ``box.obb``, ``child_lo``/``child_hi`` (float32, node space) and the SA figures."""
    lo = np.array([c.lo for c in box.children])
    hi = np.array([c.hi for c in box.children])
    box.aabb_sa = float(surface_area(lo, hi).sum())
    box.obb = INVALID_OBB
    chosen_lo, chosen_hi = lo, hi
    if obb_threshold is not None and box.children[0].rot_lo is not None:
        rlo = np.array([c.rot_lo for c in box.children])  # (k, 104, 3)
        rhi = np.array([c.rot_hi for c in box.children])
        pad = OBB_PAD * (rhi - rlo).max(axis=2, keepdims=True)
        rlo, rhi = rlo - pad, rhi + pad
        sums = surface_area(rlo, rhi).sum(axis=0)  # (104,)
        best = int(np.argmin(sums))
        box.obb_sa = float(sums[best])
        if sums[best] < obb_threshold * box.aabb_sa:
            box.obb = best
            chosen_lo, chosen_hi = rlo[:, best], rhi[:, best]
    box.child_lo, box.child_hi = to_f32_outward(chosen_lo, chosen_hi)


class Bvh:
    """A built BVH: ``root`` (BoxNode), ``width``, ``boxes`` (breadth-first list), ``leaves``,
    ``mesh`` (BLAS) or ``instances`` (TLAS), ``image`` ({byte offset: 32 dwords}) and
    ``by_offset`` ({byte offset: node}). ``encoding`` names the node format ("bvh8"/"bvh4")."""

    def __init__(self, root, width, mesh=None, instances=None):
        self.root, self.width, self.mesh, self.instances = root, width, mesh, instances
        self.boxes, self.leaves = [], []
        queue = [root]
        while queue:
            node = queue.pop(0)
            self.boxes.append(node)
            for c in node.children:
                (queue if c.kind == "box" else self.leaves).append(c)
        self.image, self.by_offset = {}, {}
        self.encoding = None

    @property
    def obb_nodes(self):
        return sum(1 for b in self.boxes if b.obb != INVALID_OBB)

    def stats(self):
        return {
            "box_nodes": len(self.boxes),
            "leaves": len(self.leaves),
            "obb_nodes": self.obb_nodes,
            "mean_children": float(np.mean([len(b.children) for b in self.boxes])),
        }


def build_bvh(mesh, *, width=8, leaf_size=None, bins=16, obb_threshold=OBB_THRESHOLD, encode=True):
    """BVH over a triangle mesh. ``obb_threshold=None`` disables OBBs.

    ``width`` 8 gives RT IP 3.1 BVH8 quantized nodes with leaves of up to ``leaf_size`` (default
    4) triangles in compressed primitive nodes; 4 gives the legacy FP32 BVH4 nodes with one
    triangle per legacy 64-byte triangle node (default ``leaf_size`` 1). The BVH4 OBB index is
    written to byte 124, where gpurt keeps it for RT IP 3.1 builds (no public source shows the
    hardware reads it there; the traversal models apply it, as Chips and Cheese, "RDNA 4's
    Raytracing Improvements" (2025) assumes).
    """
    if width not in (4, 8):
        raise ValueError(f"`width` must be 4 or 8, not {width!r}")
    if leaf_size is None:
        leaf_size = 4 if width == 8 else 1
    if not 1 <= leaf_size <= 4:
        raise ValueError(f"`leaf_size` must be 1..4 (one primitive node), not {leaf_size!r}")
    tris = mesh.triangles.astype(np.float64)
    with_obb = obb_threshold is not None
    binary = build_binary(
        tris.min(axis=1),
        tris.max(axis=1),
        lambda idx: tris[idx].reshape(-1, 3),
        leaf_size=leaf_size,
        bins=bins,
        with_obb=with_obb,
    )
    root = collapse(binary, width, lambda n: Leaf(n.prims, n.lo, n.hi, n.rot_lo, n.rot_hi))
    bvh = Bvh(root, width, mesh=mesh)
    for box in bvh.boxes:
        _choose_obb(box, obb_threshold)
    if encode:
        (encode_bvh8 if width == 8 else encode_bvh4)(bvh)
    return bvh


# --- encoding ---------------------------------------------------------------------------------------


def _layout(bvh, box_size, leaf_bytes):
    offset = 128
    for box in bvh.boxes:
        box.offset = offset
        offset += box_size
    for box in bvh.boxes:
        for c in box.children:
            if c.kind != "box":
                c.offset = offset
                offset += leaf_bytes(c)
    bvh.size = offset


def encode_leaves(bvh):
    """Primitive nodes of every BLAS leaf through the primitive-node packer (``pack_triangles``:
    pairs of consecutive triangles, as many 128-byte nodes as needed; the leaf's child ``range`` is
    their number). Sets ``leaf.nodes`` (list of 32-dword lists) and ``leaf.where`` ((node, pair,
    tri) of each triangle)."""
    from gpurtl.golden.ray_accel.encode import primitive_node as pn
    from gpurtl.golden.ray_accel.encode.ray import node_dwords

    tris = bvh.mesh.triangles
    for leaf in bvh.leaves:
        if leaf.kind != "leaf":
            continue
        packed = pn.pack_triangles(
            pn.Triangle(tuple(tuple(float(c) for c in v) for v in tris[p]), prim_id=int(p))
            for p in leaf.prims
        )
        leaf.nodes = [node_dwords(node) for node, _ in packed]
        leaf.where = [(k, pair, t) for k, (_, where) in enumerate(packed) for pair, t in where]


def encode_bvh8(bvh):
    """Write every box node as a BVH8 quantized node (``box_node.encode_box8``)."""
    from gpurtl.golden.ray_accel.encode import box_node

    if bvh.mesh is not None:
        encode_leaves(bvh)
    _layout(bvh, 128, lambda c: 128 * len(getattr(c, "nodes", None) or [None]))
    for box in bvh.boxes:
        boxes = [c for c in box.children if c.kind == "box"]
        leaves = [c for c in box.children if c.kind != "box"]
        children = []
        for k, c in enumerate(box.children):
            ctype = 5 if c.kind == "box" else (6 if c.kind == "instance" else 0)
            children.append(
                {
                    "min": [float(v) for v in box.child_lo[k]],
                    "max": [float(v) for v in box.child_hi[k]],
                    "type": ctype,
                    "range": len(getattr(c, "nodes", None) or [None]),
                }
            )
        box.dwords = box_node.encode_box8(
            children,
            internal_base=(boxes[0].offset >> 3) if boxes else 0,
            leaf_base=(leaves[0].offset >> 3) if leaves else 0,
            obb_index=box.obb,
        )
        place_box8(bvh, box)
    bvh.encoding = "bvh8"
    return bvh


def place_box8(bvh, box):
    """Pointers of an encoded BVH8 box node (``box.dwords`` written) and of its leaf children,
    and their dwords in ``image`` and nodes in ``by_offset``."""
    box.ptr = (box.offset >> 3) | 5
    bvh.image[box.offset] = box.dwords
    bvh.by_offset[box.offset] = box
    for c in box.children:
        if c.kind == "box":
            continue
        c.ptr = (c.offset >> 3) | (6 if c.kind == "instance" else 0)
        bvh.by_offset[c.offset] = c
        if c.dwords is not None:
            bvh.image[c.offset] = c.dwords
        for k, dwords in enumerate(getattr(c, "nodes", None) or []):
            bvh.image[c.offset + 128 * k] = dwords


def encode_bvh4(bvh):
    """Write every box node as a legacy 128-byte FP32 BVH4 node (``box_node.encode_box4_fp32``);
    pointers use the legacy 3-bit types with 64-byte units (box 5, triangle 0, instance 6)."""
    from gpurtl.golden.ray_accel.encode import primitive_node as pn
    from gpurtl.golden.ray_accel.encode.ray import node_dwords

    _layout(bvh, 128, lambda c: 64)
    for leaf in bvh.leaves:
        if leaf.kind == "leaf":
            if len(leaf.prims) != 1:
                raise ValueError("legacy BVH4 leaves hold one triangle (build with leaf_size=1)")
            v = [tuple(float(c) for c in p) for p in bvh.mesh.triangles[leaf.prims[0]]]
            leaf.nodes = [
                node_dwords(pn.encode_legacy_node(v + [v[2]], prim_index=(int(leaf.prims[0]), 0)))[
                    :16
                ]
            ]
            bvh.image[leaf.offset] = leaf.nodes[0]
    encode_boxes4(bvh, lambda c: 6 if c.kind == "instance" else 0)
    return bvh


def encode_boxes4(bvh, leaf_type):
    """Every box node of a laid-out BVH as a legacy FP32 BVH4 node; a leaf child's pointer type
    is ``leaf_type(child)`` (box children: 5). Sets the pointers, ``image`` and ``by_offset``."""
    from gpurtl.golden.ray_accel.encode import box_node

    for box in bvh.boxes:
        for c in box.children:
            if c.kind == "box":
                c.ptr = (c.offset >> 3) | 5
            else:
                c.ptr = (c.offset >> 3) | leaf_type(c)
                bvh.by_offset[c.offset] = c
        children = [
            {
                "ptr": c.ptr,
                "min": [float(v) for v in box.child_lo[k]],
                "max": [float(v) for v in box.child_hi[k]],
            }
            for k, c in enumerate(box.children)
        ]
        box.dwords = list(box_node.encode_box4_fp32(children))
        box.dwords[31] = (box.dwords[31] & ~0x7F) | box.obb  # gpurt's obbMatrixIndex @124
        box.ptr = (box.offset >> 3) | 5
        bvh.image[box.offset] = box.dwords
        bvh.by_offset[box.offset] = box
    bvh.encoding = "bvh4"


# --- instancing -------------------------------------------------------------------------------------


def _affine(matrix):
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape not in ((3, 4), (4, 4)):
        raise ValueError(f"an instance transform is 3x4 (or 4x4), not {m.shape}")
    return m[:3, :4]


def build_tlas(instances, *, width=8, obb_threshold=OBB_THRESHOLD, blas_base=1 << 20):
    """TLAS over ``instances``: a list of ``(blas, object_to_world)`` (a :class:`Bvh` built with
    ``width=8`` and a 3x4 matrix). BLAS ``k`` is placed at VA ``blas_base * (k + 1)``; the
    returned TLAS has ``blas_va`` ({id(blas): VA}) and instance nodes with real dwords."""
    from gpurtl.golden.ray_accel.encode import box_node
    from gpurtl.golden.ray_accel.scalar import instance as inst

    if not instances:
        raise ValueError("a TLAS needs at least one instance")
    blas_va = {}
    for blas, _ in instances:
        if id(blas) not in blas_va:
            blas_va[id(blas)] = blas_base * (len(blas_va) + 1)
    lo, hi, points = [], [], []
    for blas, m in instances:
        m = _affine(m)
        v = blas.mesh.vertices.astype(np.float64) @ m[:, :3].T + m[:, 3]
        points.append(v)
        lo.append(v.min(axis=0))
        hi.append(v.max(axis=0))
    with_obb = obb_threshold is not None
    binary = build_binary(
        np.array(lo),
        np.array(hi),
        lambda idx: np.concatenate([points[i] for i in idx]),
        leaf_size=1,
        with_obb=with_obb,
    )
    root = collapse(
        binary, width, lambda n: InstanceLeaf(int(n.prims[0]), n.lo, n.hi, n.rot_lo, n.rot_hi)
    )
    tlas = Bvh(root, width, instances=instances)
    tlas.blas_va = blas_va
    for box in tlas.boxes:
        _choose_obb(box, obb_threshold)
    for leaf in tlas.leaves:
        blas, m = instances[leaf.index]
        m = _affine(m)
        full = np.vstack([m, [0, 0, 0, 1]])
        w2o = np.linalg.inv(full)[:3].astype(np.float32)
        root_lo, root_hi = blas.root.lo, blas.root.hi
        enc = box_node.encode_box8(
            [
                {
                    "min": [float(v) for v in root_lo],
                    "max": [float(v) for v in root_hi],
                    "type": 5,
                    "range": 0,
                }
            ]
        )
        leaf.dwords = inst.encode_instance(
            w2o.view(np.uint32).tolist(),
            blas_va[id(blas)] >> 3,
            user_data=leaf.index & 0xFFFFFF,
            mask=0xFF,
            filter_origin=enc[3:6],
            filter_exp=[(enc[6] >> (8 * a)) & 0xFF for a in range(3)],
            filter_count=1,
            filter_info=[enc[8:11]],
        )
    encode_bvh8(tlas)
    return tlas
