"""The driver's BVH traversal loop, the package's one loop: millions of rays at once, or one wave,
bit exact step by step.

Every ray runs the loop of gpurt ``src/shaders/TraceRay3_1.hlsl`` (``TraceRayImpl3_1``) as the
hardware sees it, in one of three modes:

* ``bvh8`` (RDNA 4): ``image_bvh8_intersect_ray`` on one BVH8 node, triangle pair or instance
  node a step, leaf handling with the primitive-range update, instance transitions,
  ``ds_bvh_stack_push8_pop1`` with the RT IP 3.1 rules;
* ``bvh4`` (RDNA 2/3 style): ``image_bvh_dual_intersect_ray`` on one legacy FP32 BVH4 node or
  legacy triangle node a step (the second node an empty box), ``ds_bvh_stack_push4_pop1``;
* ``bvh4x2``: the dual instruction on the two nodes ``ds_bvh_stack_push8_pop2`` returned (two
  boxes sorted together with ``wide_sort``), after triangle 1 of a paired legacy node its
  triangle 0 (pushed by the shader, or taken by the second engine);

with the stackless walk-back through parent pointers after a stack overflow in every mode. One
step of *all* active rays is one pass of array operations:

* box nodes: the golden batch box path (:func:`gpurtl.golden.ray_accel.vector.batch_box.box_test`, the
  child-reuse de-duplication, :func:`~gpurtl.golden.ray_accel.vector.batch_box.sort_slots`) on slots
  decoded once per node by :func:`gpurtl.golden.ray_accel.vector.batch_nodes.decode_box8` (legacy:
  ``decode_box4_fp32``), with the OBB ray rotation of
  :func:`gpurtl.golden.ray_accel.scalar.obb.obb_transform_ray`;
* triangle pairs and legacy triangles: the watertight test of
  :mod:`gpurtl.golden.ray_accel.scalar.triangle` in the same operation order with the array FP32
  operations of :mod:`gpurtl.golden.ray_accel.vector.batch_fp`, on pairs decoded once by
  :func:`gpurtl.golden.ray_accel.encode.primitive_node.decode_pair` (legacy: the node's vertices);
* instance nodes (``bvh8``): the instance transform and filter box of
  :mod:`gpurtl.golden.ray_accel.vector.batch` on nodes decoded once;
* the stack: the rules of :mod:`gpurtl.golden.ray_accel.ds_bvh_stack` on arrays (a ring of
  ``stack_size`` entries per ray).

Legacy structures run as one BLAS: RDNA 2/3 handle instances in shader code, not in the dual
instruction (whose golden model returns no children for an instance node), and the per-wave loop
has no model of that code either.

The loop is written once, as a generator (:func:`steps`) that asks its driver for each step's
intersect instructions and stack instructions and takes every decision of the shader from the
answers. Executors answer them; :func:`trace` drives it with the golden array executors
(:func:`intersect_golden`, :func:`intersect_dual_golden`, :class:`GoldenStack`) or replaces the
intersect step, the stack step and the choice of the rays that run each step (the scheduler) by
its arguments, in every mode (``sim/experiments/traversal/scale.py`` runs them on the RTL with a
limit of resident waves). The per-wave loop (:func:`gpurtl.golden.traversal.loop.wave_program`) is the
same generator on one wave with scalar executors: every step as the lanes' ``ray_accel`` and
``ds_bvh_stack`` instructions, answered by the golden ``intersect_wave`` and ``ds_bvh_stack``
models or by RTL sessions (the RTL run with the CU model's timing, ``traversal --rtl``).

``tests/golden/bvh/test_wavefront.py`` checks the per-step intersect results against
:func:`gpurtl.golden.ray_accel.vector.batch.intersect_words` on the real node dwords, the array
and the scalar executors' answers on every step of a wave, the whole loop against the per-wave
loop, and the closest hits against a brute-force float64 test of every triangle.

Ray flags: ``first_hit`` ends a ray at its first accepted hit (``RAY_FLAG_ACCEPT_FIRST_HIT_AND_
END_SEARCH``, the shadow- and AO-ray setting). ``tmax`` is the initial ray extent.

Records (``bvh8``): for the rays of ``record`` (a boolean mask) every step's ray index, step
number, node address (byte VA), node kind and test counts are kept, for the cycle model to replay
whole waves.
"""

import numpy as np

from gpurtl.facts.ray_accel import INVALID_NODE, INVALID_OBB, ROOT_NODE_PTR, SKIP_0_7, TERMINAL_NODE
from gpurtl.golden.ray_accel.scalar import obb as obb_model
from gpurtl.golden.ray_accel.scalar import triangle as T
from gpurtl.golden.ray_accel.vector import batch_box as BB
from gpurtl.golden.ray_accel.vector import batch_fp as F
from gpurtl.golden.ray_accel.vector import batch_nodes as BN

__all__ = [
    "COUNTERS",
    "GoldenStack",
    "KIND_BOX",
    "KIND_INSTANCE",
    "KIND_PAIR",
    "MODES",
    "Rays",
    "Tables",
    "box_slots",
    "drive",
    "intersect_dual_golden",
    "intersect_golden",
    "steps",
    "trace",
]

KIND_BOX, KIND_PAIR, KIND_INSTANCE = 0, 1, 2
COUNTERS = (
    "steps",
    "box_tests",
    "tri_tests",
    "instances",
    "pushes",
    "pops",
    "fetches",
    "overflows",
    "walkback_steps",
)
_NULL_PTR = 0x5  # the empty second node of a single legacy step (never fetched)
_INV = np.uint32(INVALID_NODE)
_POS_INF = np.uint32(0x7F800000)
_PREFIX = 0x1FFFFFFF
_GROW = 6  # gpurt's default box grow (``default_desc``)


def _u32(x):
    return np.asarray(x, dtype=np.uint32)


class Tables:
    """Node tables of a built scene (a BLAS, or a TLAS whose instances hold BLASes): every node's
    row, kind, VA, parent pointer and the decoded contents the steps need.

    ``top``: a :class:`gpurtl.golden.bvh.builder.Bvh` encoded as BVH8 (TLAS or BLAS).
    """

    def __init__(self, top, *, top_va=0):
        from gpurtl.golden.ray_accel.encode import primitive_node as pn
        from gpurtl.golden.ray_accel.encode.ray import node_bytes, pair_index

        if top.encoding not in ("bvh8", "bvh4"):
            raise ValueError(f"`top` must be encoded as 'bvh8' or 'bvh4', not {top.encoding!r}")
        self.legacy = top.encoding == "bvh4"
        if self.legacy and top.instances:
            raise ValueError("legacy BVH4 structures run as one BLAS (no instance nodes)")
        self.top = top
        self.bvhs = [top] + (
            [b for b in _unique(blas for blas, _ in top.instances)] if top.instances else []
        )
        blas_va = getattr(top, "blas_va", {})
        self.va_base = [top_va] + [blas_va[id(b)] for b in self.bvhs[1:]]
        self.blas_of_inst = (
            np.array([self.bvhs.index(blas) for blas, _ in top.instances], np.int64)
            if top.instances
            else np.zeros(0, np.int64)
        )
        # row keys: one slot per 64 bytes of every BVH
        self.key_base = np.cumsum([0] + [-(-b.size // 64) for b in self.bvhs])
        self.row_of_key = np.full(int(self.key_base[-1]), -1, np.int64)
        kind, va, parent, slot = [], [], [], []
        box_rows, box_dw, pair_rows, inst_rows, inst_dw = [], [], [], [], []
        self.inst_ptr = np.zeros(len(top.instances or []), np.uint32)
        self._leaf_of_row = {}
        leaf_first = {}
        for b, bvh in enumerate(self.bvhs):
            for box in bvh.boxes:
                for c in box.children:
                    if c.kind == "leaf":
                        for k in range(len(c.nodes)):
                            leaf_first[(b, c.offset + 128 * k)] = (c.ptr, box.ptr)
                    elif c.kind == "instance":
                        leaf_first[(b, c.offset)] = (c.ptr, box.ptr)
                        self.inst_ptr[c.index] = c.ptr
                    else:
                        leaf_first[(b, c.offset)] = (c.ptr, box.ptr)
            leaf_first.setdefault((b, bvh.root.offset), (bvh.root.ptr, INVALID_NODE))
            for offset, dwords in sorted(bvh.image.items()):
                row = len(kind)
                self.row_of_key[self.key_base[b] + offset // 64] = row
                node = bvh.by_offset.get(offset)
                own, par = leaf_first[(b, offset)]
                va.append(self.va_base[b] + offset)
                parent.append(par)
                slot.append(own)
                if node is not None and node.kind == "box":
                    kind.append(KIND_BOX)
                    box_rows.append(row)
                    box_dw.append(dwords)
                elif node is not None and node.kind == "instance":
                    kind.append(KIND_INSTANCE)
                    inst_rows.append(row)
                    inst_dw.append(dwords)
                else:
                    kind.append(KIND_PAIR)
                    pair_rows.append((row, dwords))
                    self._leaf_of_row[row] = node
        self.kind = np.array(kind, np.int8)
        self.dwords = np.zeros((len(kind), 32), np.uint32)
        row = 0
        for bvh in self.bvhs:
            for _offset, dw in sorted(bvh.image.items()):
                self.dwords[row, : len(dw)] = dw
                row += 1
        self.va = np.array(va, np.int64)
        self.parent_ptr = np.array(parent, np.uint32)
        self.slot_ptr = np.array(slot, np.uint32)
        n = len(kind)
        # box nodes, decoded once (slot-major: slot, [axis,] node)
        self.box_index = np.full(n, -1, np.int64)
        self.box_index[box_rows] = np.arange(len(box_rows))
        box_dw = np.array(box_dw, np.uint32).reshape(-1, 32)
        if self.legacy:
            # pointer flags are 0 here, so the legacy cull flags never cull
            dec = BN.decode_box4_fp32(box_dw)
            valid = dec["valid"]
        else:
            dec = BN.decode_box8(box_dw)
            valid = dec["valid"] & ((dec["mask"] & np.uint32(0xFF)) != 0)
        self.box = dec
        self.box_ptr_t = np.ascontiguousarray(dec["ptr"].T)
        self.box_valid_t = np.ascontiguousarray(valid.T)
        self.box_min_t = np.ascontiguousarray(dec["min"].view(np.float32).transpose(1, 2, 0))
        self.box_max_t = np.ascontiguousarray(dec["max"].view(np.float32).transpose(1, 2, 0))
        self.box_count = (dec["valid"]).sum(axis=1)
        self.pair_base = np.full(n, -1, np.int64)
        if self.legacy:
            # legacy triangle nodes: vertices v0..v3 (DW0-11) and the pair's triangle ids
            self.pair_base[[row for row, _ in pair_rows]] = np.arange(len(pair_rows))
            self.tri_verts = np.array(
                [np.asarray(dw[:12], np.uint32).reshape(4, 3) for _, dw in pair_rows], np.uint32
            ).reshape(-1, 4, 3)
            self.tri_prims = np.array(
                [self._legacy_tris(row) for row, _ in pair_rows], np.int64
            ).reshape(-1, 2)
            pair_rows = []
        # triangle pairs: (row, pair) -> vertices, prim ids, validity, navigation
        verts, prims, valid1, nav = [], [], [], []
        for row, dwords in pair_rows:
            raw = node_bytes(list(dwords))
            h = pn.decode_header(raw)
            self.pair_base[row] = len(nav)
            for p in range(8):
                if p >= h.pair_count:
                    verts.append(np.zeros((2, 3, 3), np.uint32))
                    prims.append((0, 0))
                    valid1.append(False)
                    nav.append(3)
                    continue
                d = pn.decode_pair(raw, p)
                t0, t1 = d.tris
                verts.append(np.array([t0.vertices, t1.vertices], np.uint32))
                prims.append((t0.prim_id, t1.prim_id))
                valid1.append(bool(t1.valid))
                nav.append(d.navigation)
        del pair_index
        self.pair_verts = np.array(verts, np.uint32).reshape(-1, 2, 3, 3)
        self.pair_prims = np.array(prims, np.int64).reshape(-1, 2)
        self.pair_valid1 = np.array(valid1, bool)
        self.pair_nav = np.array(nav, np.uint32)
        # instance nodes
        self.inst_index = np.full(n, -1, np.int64)
        self.inst_index[inst_rows] = np.arange(len(inst_rows))
        self.inst = (
            BN.decode_instance(np.array(inst_dw, np.uint32).reshape(-1, 32)) if inst_rows else None
        )
        self.inst_of_row = np.full(n, -1, np.int64)
        for b, bvh in enumerate(self.bvhs):
            for leaf in bvh.leaves:
                if leaf.kind == "instance":
                    self.inst_of_row[
                        self.row(np.array([b]), np.array([leaf.ptr], np.uint32))[0]
                    ] = leaf.index

    def _legacy_tris(self, row):
        """Triangle ids of a legacy node's type 0 and type 1 (the builder's pair; a leaf of
        one triangle, without a pair, is reached as type 0 only)."""
        leaf = self._leaf_of_row[row]
        pair = getattr(leaf, "legacy_tris", None)
        t0, t1 = pair if pair else (leaf.prims[0], leaf.prims[0])
        return t0, t1

    def row(self, bvh, ptr):
        """Rows of pointers ``ptr`` (uint32) in BVHs ``bvh`` (indices into ``bvhs``); legacy
        pointers have 3 type bits, RT IP 3.1 pointers 4."""
        offset = (ptr.astype(np.int64) & (~7 if self.legacy else ~0xF)) << 3
        return self.row_of_key[self.key_base[bvh] + offset // 64]

    @property
    def nodes(self):
        return len(self.kind)


def _unique(items):
    seen, out = set(), []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


# --- the steps ----------------------------------------------------------------------------------


def _box_step(tb, rows, origin, direction, inv_dir, extent):
    """8 result pointers (M, 8) of BVH8 box nodes (``batch._bvh8`` on pre-decoded slots)."""
    bi = tb.box_index[rows]
    d = tb.box
    ob = d["obb_index"][bi]
    rot = ob != INVALID_OBB
    if np.any(rot):
        origin, direction, inv_dir = origin.copy(), direction.copy(), inv_dir.copy()
        k = np.nonzero(rot)[0]
        o2, d2, _bad = obb_model.obb_transform_ray(ob[k].astype(np.int64), origin[k], direction[k])
        origin[k], direction[k], inv_dir[k] = o2, d2, F.rcp(d2)
    return box_slots(
        np.take(tb.box_ptr_t, bi, axis=1),
        np.take(tb.box_valid_t, bi, axis=1),
        np.take(tb.box_min_t, bi, axis=2),
        np.take(tb.box_max_t, bi, axis=2),
        np.ascontiguousarray(origin.T),
        np.ascontiguousarray(inv_dir.T),
        extent,
    )


_GROW_FACTOR = 1.0 + _GROW * 2.0**-24
_STAGES = None


def box_slots(ptrs, valid, bmin, bmax, origin, inv_dir, extent, *, wide=None, dedup=True):
    """Steps 1-5 of the box path for 8 slots with the default descriptor (closest-first sort,
    triangles first, box grow 6), in native float32: the slab test of
    :func:`gpurtl.golden.ray_accel.vector.batch_box.box_test`, the de-duplication and
    :func:`~gpurtl.golden.ray_accel.vector.batch_box.sort_slots`. The same decisions, because every
    value that reaches a decision is the IEEE binary32 result either way: the golden model only
    differs in NaN payloads and in the sign of zero of ``maxnum``/``minnum`` ties, and both feed
    comparisons only (``-0 == +0``, NaN compares false). ``tests/golden/bvh/test_wavefront.py``
    checks the two on random and real nodes.

    Arrays are slot-major for speed: ``ptrs``/``valid`` (8, M), ``bmin``/``bmax`` float32
    (8, 3, M), ``origin`` and ``inv_dir`` uint32 (3, M) patterns, ``extent`` uint32 (M,).
    ``wide`` (M,) bool: rows sorted 8-wide (a BVH8 node, or the two boxes of a dual instruction
    with ``wide_sort``); the others stop after the narrow stages (slots 0-3 and 4-7 apart; all
    rows are wide by default). ``dedup``: drop a pointer equal to the slot before it (child
    reuse: BVH8 nodes, not the legacy dual form). Returns the 8 sorted result pointers (M, 8)."""
    global _STAGES
    if _STAGES is None:
        from gpurtl.golden.ray_accel.scalar.sort import NARROW_STAGES, STAGES

        narrow = len(NARROW_STAGES)
        _STAGES = [(pair, k >= narrow) for k, stage in enumerate(STAGES) for pair in stage]
    o = origin.view(np.float32)
    inv = inv_dir.view(np.float32)
    with np.errstate(all="ignore"):
        t1 = bmin - o
        t1 *= inv
        t2 = bmax - o
        t2 *= inv
        # with a finite 1/d and min <= max, (min - o) / d and (max - o) / d are ordered by the
        # sign of 1/d and NaN only where a plane is (invalid slot: both): min/max pick what the
        # golden sign-selected planes give. Rays with an infinite 1/d (a zero direction
        # component, where 0 * inf can make one of the two NaN) and boxes with min > max (which
        # no encoder writes) take the golden selection.
        lo = np.minimum(t1, t2)
        hi = np.maximum(t1, t2)
        odd = ~np.isfinite(inv).all(axis=0) | (bmin > bmax).any(axis=(0, 1))
        if odd.any():
            pos = inv[:, odd] >= 0
            lo[:, :, odd] = np.where(pos, t1[:, :, odd], t2[:, :, odd])
            hi[:, :, odd] = np.where(pos, t2[:, :, odd], t1[:, :, odd])
        tmin = np.fmax(np.fmax(lo[:, 0], lo[:, 1]), lo[:, 2])
        tmax = np.fmin(np.fmin(hi[:, 0], hi[:, 1]), hi[:, 2])
        nan = np.isnan(tmin) | np.isnan(tmax)
        min_t = np.fmax(tmin, np.float32(0))
        max_t = np.fmin(tmax, extent.view(np.float32))
        grown = (max_t.astype(np.float64) * _GROW_FACTOR).astype(np.float32)
        hit = ~nan & valid & (min_t <= grown)
    tested = np.where(hit, ptrs, _INV)
    if dedup:
        tested[1:] = np.where(tested[1:] == tested[:-1], _INV, tested[1:])
    live = tested != _INV
    nlive = live.sum(axis=0)
    m = tested.shape[1]
    out = np.full((m, 8), _INV, np.uint32)
    # one live slot goes to slot 0, unless a narrow sort keeps it in slots 4-7
    one = nlive == 1
    if wide is not None:
        one &= wide | live[:4].any(axis=0)
    if one.any():
        out[one, 0] = tested[:, one].T[live[:, one].T]
    many = np.nonzero((nlive > 1) | ((nlive == 1) & ~one))[0]
    if len(many):
        tp = tested[:, many]
        key = np.where(hit[:, many], min_t[:, many], np.float32(np.inf))
        bits = key.view(np.uint32).astype(np.int64)
        bits[bits == 0x80000000] = 0  # -0 sorts as +0
        k = np.where(bits & 0x80000000, 0xFFFFFFFF - bits, bits | 0x80000000)
        low = tp & np.uint32(7)
        ext = 4 * (tp == _INV) + 2 * (low > 3) + (low != 1)
        k |= ext.astype(np.int64) << 32
        slot = np.repeat(np.arange(8, dtype=np.int8)[:, None], len(many), axis=1)
        narrow = None if wide is None or wide[many].all() else ~wide[many]
        for (i, j), wide_stage in _STAGES:
            ki, kj = k[i], k[j]
            swap = kj < ki
            si, sj = slot[i], slot[j]
            if wide_stage and narrow is not None:
                swap &= ~narrow
                k[i], k[j] = np.where(swap, kj, ki), np.where(swap, ki, kj)
            else:
                k[i], k[j] = np.minimum(ki, kj), np.maximum(ki, kj)
            slot[i], slot[j] = np.where(swap, sj, si), np.where(swap, si, sj)
        out[many] = np.take_along_axis(tp, slot.astype(np.int64), axis=0).T
    return out


def _tri_fast(origin, setup, a, b, c):
    """:func:`gpurtl.golden.ray_accel.scalar.triangle.intersect` (``hit``, ``t`` only) with the array FP32
    operations of :mod:`~gpurtl.golden.ray_accel.vector.batch_fp` in the same order."""
    kx, ky, kz, sx, sy, sz = setup
    nsx, nsy = sx ^ np.uint32(0x80000000), sy ^ np.uint32(0x80000000)
    pts = []
    for p in (a, b, c):
        rel = F.sub(p, origin)
        rx = np.take_along_axis(rel, kx[:, None], axis=1)[:, 0]
        ry = np.take_along_axis(rel, ky[:, None], axis=1)[:, 0]
        rz = np.take_along_axis(rel, kz[:, None], axis=1)[:, 0]
        pts.append((F.fma(nsx, rz, rx), F.fma(nsy, rz, ry), rz))
    (ax, ay, az), (bx, by, bz), (cx, cy, cz) = pts
    u = F.sub(F.mul(cx, by), F.mul(cy, bx))
    v = F.sub(F.mul(ax, cy), F.mul(ay, cx))
    w = F.sub(F.mul(bx, ay), F.mul(by, ax))
    zero = np.zeros_like(u)
    neg = F.lt(u, zero) | F.lt(v, zero) | F.lt(w, zero)
    pos = F.lt(zero, u) | F.lt(zero, v) | F.lt(zero, w)
    det = F.add(F.add(u, v), w)
    tnum = F.fma(w, F.mul(sz, cz), F.fma(v, F.mul(sz, bz), F.mul(u, F.mul(sz, az))))
    with np.errstate(all="ignore"):
        t = tnum.view(np.float32).astype(np.float64) / det.view(np.float32).astype(np.float64)
        t = t.astype(np.float32).view(np.uint32)
    t = np.where(F.is_nan(t), np.uint32(F.CANONICAL_NAN), t)
    det_ok = ~F.is_nan(det) & ((det & np.uint32(0x7FFFFFFF)) != 0)
    hit = ~(neg & pos) & det_ok & F.le(zero, t) & F.lt(t, np.full_like(t, _POS_INF))
    return hit, t


def _pair_step(tb, rows, ptrs, origin, setup):
    """``(t (M, 2), prim (M, 2), valid1 (M,), nav (M,))`` of triangle-pair pointers: DW0/DW4,
    the prim ids of DW3/DW7, whether triangle 1 exists, the navigation bits of DW8."""
    p = tb.pair_base[rows] + ((ptrs & 3) | ((ptrs & 8) >> 1)).astype(np.int64)
    v = tb.pair_verts[p]  # (M, 2, 3, 3)
    m = len(rows)
    o2 = np.repeat(origin, 2, axis=0)
    s2 = tuple(np.repeat(x, 2, axis=0) for x in setup)
    hit, t = _tri_fast(
        o2, s2, v[:, :, 0].reshape(-1, 3), v[:, :, 1].reshape(-1, 3), v[:, :, 2].reshape(-1, 3)
    )
    t = np.where(hit, t, _POS_INF).reshape(m, 2)
    valid1 = tb.pair_valid1[p]
    t[:, 1] = np.where(valid1, t[:, 1], _POS_INF)
    return t, tb.pair_prims[p], valid1, tb.pair_nav[p]


def _instance_step(tb, rows, origin, direction, extent):
    """``(hit (M,), origin', dir' (M, 3))`` of instance nodes (``batch._instance`` with mask
    0xFF and no pointer flags: the filter box decides)."""
    ii = tb.inst_index[rows]
    d = tb.inst
    new_o, new_d = obb_model.transform_rows(d["world_to_object"][ii], origin, direction)
    m = len(rows)
    ptrs, keys = BB.test_slots(
        d["ptr"][ii],
        d["valid"][ii],
        d["min"][ii],
        d["max"][ii],
        np.zeros((m, 4), bool),
        new_o,
        F.rcp(new_d),
        extent,
        np.full(m, _GROW, np.uint32),
        np.zeros(m, np.uint32),
        np.ones(m, bool),
    )
    out = BB.sort_slots(ptrs, keys, np.ones(m, np.uint32), np.zeros(m, np.uint32), np.ones(m, bool))
    culled = (d["mask"][ii] & np.uint32(0xFF)) == 0
    return ((out[:, 0] & 0xFF) != 0xFF) & ~culled, new_o, new_d


# --- the stack (ds_bvh_stack_push8_pop1 with the RT IP 3.1 rules) -------------------------------


class _Stack:
    def __init__(self, n, size):
        self.size = size
        self.ring = np.zeros((n, size), np.uint32)
        self.valid = np.zeros(n, np.int64)
        self.to_tlas = np.zeros(n, np.int64)
        self.addr = np.zeros(n, np.int64)
        self.has_tlas = np.zeros(n, bool)
        self.overflowed = np.zeros(n, bool)
        self.b2t = np.zeros(n, bool)

    def push(self, r, node, on):
        r, node = r[on], node[on]
        if not len(r):
            return
        s = self.size
        self.overflowed[r] |= self.valid[r] == s
        self.ring[r, self.addr[r]] = node
        self.addr[r] = np.where(self.addr[r] == s - 1, 0, self.addr[r] + 1)
        self.has_tlas[r] &= self.to_tlas[r] != s
        self.to_tlas[r] = np.minimum(self.to_tlas[r] + 1, s)
        self.valid[r] = np.minimum(self.valid[r] + 1, s)

    def pop(self, r):
        s = self.size
        b2t = (self.to_tlas[r] == 0) & self.has_tlas[r]
        self.has_tlas[r] &= ~b2t
        empty = self.valid[r] == 0
        out = np.where(self.overflowed[r], _INV, np.uint32(TERMINAL_NODE)).astype(np.uint32)
        go = ~empty
        g = r[go]
        self.to_tlas[g] = np.maximum(self.to_tlas[g] - 1, 0)
        self.valid[g] -= 1
        self.addr[g] = np.where(self.addr[g] == 0, s - 1, self.addr[g] - 1)
        node = self.ring[g, self.addr[g]]
        inst = (node & 7) == 6
        gi = g[inst]
        drop = self.has_tlas[gi]
        self.valid[gi[drop]] = self.to_tlas[gi[drop]]
        self.overflowed[gi[drop]] = True
        self.has_tlas[gi] = True
        self.to_tlas[gi] = 0
        out[go] = node
        b2t &= ~empty
        self.has_tlas[r[empty]] = False
        self.b2t[r] = b2t
        return out

    def pop2(self, r):
        """``ds_bvh_stack_push8_pop2``'s two results ``(dst0, dst1)`` after the push: the pop, then
        the other triangle of a ``TRIANGLE_1`` pop, or ``try_pop`` (never an instance node, never
        across the TLAS boundary, never from an empty stack; ``dst0`` is then the deeper entry)."""
        s = self.size
        first = self.pop(r)
        dst0, dst1 = first.copy(), np.full(len(r), _INV, np.uint32)
        tri1 = (first & np.uint32(7)) == 1
        dst0[tri1], dst1[tri1] = first[tri1] & ~np.uint32(7), first[tri1]
        k = np.nonzero(~tri1)[0]
        g = r[k]
        ok = ~((self.to_tlas[g] == 0) & self.has_tlas[g]) & (self.valid[g] > 0)
        addr = np.where(self.addr[g] == 0, s - 1, self.addr[g] - 1)
        node = self.ring[g, addr]
        ok &= (node & np.uint32(7)) != 6
        k, g, addr, node = k[ok], g[ok], addr[ok], node[ok]
        self.addr[g] = addr
        self.to_tlas[g] = np.maximum(self.to_tlas[g] - 1, 0)
        self.valid[g] -= 1
        dst1[k], dst0[k] = dst0[k], node
        return dst0, dst1


def _special(x):
    return (x >> np.uint32(3)) == np.uint32(_PREFIX)


def _push_slots(st, r, last, data, rules31=True):
    """gpurt ``ds_stack_push8_impl`` (:func:`gpurtl.golden.ray_accel.ds_bvh_stack.push_slots`),
    with the RT IP 3.1 rules or without (the 3.0 rules of ``push8_pop2`` and ``push4_pop1``),
    pushing as it goes; the number of entries pushed per ray."""
    walk = ~_special(last)
    if rules31:
        match = (data == last[:, None]) | ((data & 7) <= 3)
        valid = ~walk | match.any(axis=1)
        rng = ((last & 4) == 0) & ~walk
        rng_end = rng & ((last & 2) != 0)
        last_prim = (last & 7) <= 3
        valid = (valid | last_prim) & ~rng_end
    else:
        match = data == last[:, None]
        valid = ~walk | match.any(axis=1)
        rng = np.zeros(len(r), bool)
    skip03 = np.zeros(len(r), bool)
    skip47 = np.zeros(len(r), bool)
    pushed = np.zeros(len(r), np.int64)
    for s in range(7, -1, -1):
        node = data[:, s]
        sp = _special(node)
        if s >= 4:
            cond = sp & valid & ~skip47
            skip03 |= cond & ((node & 2) == 0)
            skip47 |= cond & ((node & 4) == 0)
            if s == 6 and rules31:
                skip03 |= rng
                skip47 |= rng
            skip = skip47
        else:
            skip03 |= sp & valid & ((node & 2) == 0)
            skip = skip03
        valid &= ~(walk & match[:, s])
        on = valid & ~sp & ~skip
        if s == 7 and rules31:
            eon = (last & 1) != 0
            nxt = np.where((node & 0xF) == 3, node ^ np.uint32(0xB), node + np.uint32(1))
            nxt = np.where(eon, (node & ~np.uint32(0xF)) + np.uint32(0x10), nxt)
            node = np.where(rng, nxt, node).astype(np.uint32)
        st.push(r, node, on)
        pushed += on
    return pushed


class GoldenStack:
    """The loop's default stack step: the stack instruction of ``mode`` on a ring of ``size``
    entries per ray, on arrays (``ds_bvh_stack_push8_pop1`` with the RT IP 3.1 rules for
    ``bvh8``; ``push8_pop2`` and ``push4_pop1`` with the 3.0 rules for ``bvh4x2`` and ``bvh4``).

    Called as ``stack(r, last, data)`` for rays ``r`` with the instruction's last-node pointers
    ``last`` (M,) and result slots ``data`` (M, 8) (uint32), it returns ``(first, second, pushed,
    overflowed, b2t)``: the popped node(s) (``second`` is ``INVALID_NODE`` unless ``pop2``
    returned two), the entries pushed (M,), whether the stack overflowed in this instruction,
    and the ``blas2tlas_pop`` flag of the pop."""

    def __init__(self, n, size, mode="bvh8"):
        self.mode = mode
        self.st = _Stack(n, size)

    def __call__(self, r, last, data):
        st = self.st
        before = st.overflowed[r].copy()
        pushed = _push_slots(st, r, last, data, rules31=self.mode == "bvh8")
        if self.mode == "bvh4x2":
            first, second = st.pop2(r)
        else:
            first, second = st.pop(r), np.full(len(r), _INV, np.uint32)
        return first, second, pushed, st.overflowed[r] & ~before, st.b2t[r]


# --- the loop -----------------------------------------------------------------------------------


def _ops(tb, rows, ptr, origin, direction, extent):
    return {
        "ptr": ptr.copy(),
        "dwords": tb.dwords[rows],
        "origin": origin.copy(),
        "dir": direction.copy(),
        "extent": extent.copy(),
    }


class Result:
    """Closest hits (``t`` float, ``prim``, ``inst``), per-ray counters (``counts[name]``) and,
    for recorded rays, the step records (``rec_*`` arrays, one entry per step)."""


class Rays:
    """Per-ray state: the world ray, the ray in the current BVH's space (``o``, ``d``: uint32
    float32 patterns (N, 3); ``inv``: its reciprocal direction; ``setup``: its triangle set-up),
    the closest hit so far (``t_hit``, uint32 pattern: the next instruction's extent; ``prim``,
    ``hit_inst``) and where the ray is (``where``: the BVH, ``inst``: the instance)."""

    def __init__(self, origins, dirs, tmax):
        n = len(origins)
        self.world_o = np.ascontiguousarray(np.asarray(origins, np.float32)).view(np.uint32)
        self.world_o = self.world_o.reshape(n, 3)
        self.world_d = np.ascontiguousarray(np.asarray(dirs, np.float32)).view(np.uint32)
        self.world_d = self.world_d.reshape(n, 3)
        self.o, self.d = self.world_o.copy(), self.world_d.copy()
        self.inv_world = F.rcp(self.world_d)
        self.inv = self.inv_world.copy()
        self.setup_world = T.ray_setup(self.world_d)
        self.setup = [x.copy() for x in self.setup_world]
        self.t_hit = np.full(n, _POS_INF, np.uint32)
        if tmax is not None:
            self.t_hit[:] = np.asarray(np.broadcast_to(tmax, (n,)), np.float32).view(np.uint32)
        self.prim = np.full(n, -1, np.int64)
        self.inst = np.full(n, -1, np.int64)
        self.hit_inst = np.full(n, -1, np.int64)
        self.where = np.zeros(n, np.int64)

    def to_world(self, r):
        """Rays ``r`` back in the TLAS (world space)."""
        self.where[r], self.inst[r] = 0, -1
        self.o[r], self.d[r], self.inv[r] = self.world_o[r], self.world_d[r], self.inv_world[r]
        for x, y in zip(self.setup, self.setup_world):
            x[r] = y[r]


def intersect_golden(tb, ray, r, rows, ptr, kinds):
    """The loop's default intersect step: ``image_bvh8_intersect_ray`` of rays ``r`` (in the
    state ``ray``, a :class:`Rays`) on nodes ``ptr`` (uint32 (M,)), at ``rows`` of tables ``tb``,
    by the golden array paths (module doc string).

    ``kinds``: the masks ``(box, pair, instance)`` (M,) of the nodes' kinds. Returns ``(box, pair,
    instance)``, each ``None`` where no ray has a node of that kind:

    * ``box``: the 8 sorted result pointers (result DW0-7) of the box nodes (B, 8);
    * ``pair``: ``(t, prim, valid1, nav)`` of the triangle pairs: the two triangles' distances
      (uint32 (P, 2), +inf for a miss or an absent triangle 1; DW0/DW4), primitive ids ((P, 2);
      DW3/DW7), whether triangle 1 exists (P,) and the navigation bits (P,) of DW8;
    * ``instance``: ``(hit, origin, dir)`` of the instance nodes: whether the filter box is hit
      (I,), the ray in the instance's space (uint32 (I, 3) each)."""
    kb, kp, ki = kinds
    box = pair = inst = None
    if kb.any():
        rb = r[kb]
        box = _box_step(tb, rows[kb], ray.o[rb], ray.d[rb], ray.inv[rb], ray.t_hit[rb])
    if kp.any():
        rp = r[kp]
        pair = _pair_step(tb, rows[kp], ptr[kp], ray.o[rp], [x[rp] for x in ray.setup])
    if ki.any():
        ri = r[ki]
        inst = _instance_step(tb, rows[ki], ray.o[ri], ray.d[ri], ray.t_hit[ri])
    return box, pair, inst


def _bvh8_step(tb, ray, r, rows, node, first_hit, probe, walking):
    """One ``image_bvh8_intersect_ray`` per ray ``r`` (a box, a triangle pair or an instance
    node), asked of the driver (``("intersect", args, info)``, answered as
    :func:`intersect_golden` answers), and the shader's handling of its results: the closest-hit
    update, the leaf's last-node pointer, the instance transition; a generator returning
    ``(data, last, stop, box_tests, tri_tests)``."""
    m = len(r)
    kind = tb.kind[rows]
    data = np.full((m, 8), _INV, np.uint32)
    last = np.full(m, _INV, np.uint32)
    kb, kp, ki = kind == KIND_BOX, kind == KIND_PAIR, kind == KIND_INSTANCE
    box_tests = np.zeros(m, np.int64)
    tri_tests = np.zeros(m, np.int64)
    stop = np.zeros(m, bool)
    box, pair, inst = yield (
        "intersect",
        (tb, ray, r, rows, node[r], (kb, kp, ki)),
        {"walking": walking},
    )
    if box is not None:
        rb = r[kb]
        data[kb] = box
        if probe is not None:
            ops = _ops(tb, rows[kb], node[rb], ray.o[rb], ray.d[rb], ray.t_hit[rb])
            probe("box", ops, data[kb])
        box_tests[kb] = tb.box_count[tb.box_index[rows[kb]]]
    if pair is not None:
        rp = r[kp]
        t2, prims, valid1, nav = pair
        if probe is not None:
            ops = _ops(tb, rows[kp], node[rp], ray.o[rp], ray.d[rp], ray.t_hit[rp])
            probe("pair", ops, pair)
        tri_tests[kp] = 1 + valid1
        accepted = np.zeros(len(rp), bool)
        for k in (0, 1):
            t = t2[:, k]
            ok = (t < _POS_INF) & (t < ray.t_hit[rp]) & ((t & np.uint32(0x80000000)) == 0)
            ray.t_hit[rp] = np.where(ok, t, ray.t_hit[rp])
            ray.prim[rp] = np.where(ok, prims[:, k], ray.prim[rp])
            ray.hit_inst[rp] = np.where(ok, ray.inst[rp], ray.hit_inst[rp])
            accepted |= ok
        dp = np.full((len(rp), 8), _INV, np.uint32)
        dp[:, 7] = node[rp]
        data[kp] = dp
        last[kp] = np.uint32(0xFFFFFFF8) | (nav & 3)
        if first_hit:
            stop[kp] = accepted
    if inst is not None:
        ri = r[ki]
        hit, no, nd = inst
        if probe is not None:
            ops = _ops(tb, rows[ki], node[ri], ray.o[ri], ray.d[ri], ray.t_hit[ri])
            probe("instance", ops, inst)
        h = ri[hit]
        inst_idx = tb.inst_of_row[rows[ki][hit]]
        ray.where[h] = tb.blas_of_inst[inst_idx]
        ray.inst[h] = inst_idx
        ray.o[h], ray.d[h] = no[hit], nd[hit]
        ray.inv[h] = F.rcp(nd[hit])
        for x, y in zip(ray.setup, T.ray_setup(nd[hit])):
            x[h] = y
        di = np.full((len(ri), 8), _INV, np.uint32)
        di[hit, 6] = SKIP_0_7
        di[hit, 7] = ROOT_NODE_PTR
        data[ki] = di
    return data, last, stop, box_tests, tri_tests


#: legacy triangle node types 0 and 1: ``(v0, v1, v2)`` and ``(v1, v3, v2)``
_LEGACY_VERTS = np.array([[0, 1, 2], [1, 3, 2]])


def _legacy_tri(tb, rows, ptrs, origin, setup):
    """Closest-hit distances (float32 (M,), +inf for a miss) of legacy triangle nodes: the
    dual instruction's ``t_num / t_den`` as the shader divides them (a miss returns +inf / 1)."""
    v = tb.tri_verts[tb.pair_base[rows]]  # (M, 4, 3)
    pick = _LEGACY_VERTS[(ptrs & 1).astype(np.int64)]
    a, b, c = (np.take_along_axis(v, pick[:, k, None, None], axis=1)[:, 0] for k in range(3))
    hit, t = _tri_fast(origin, setup, a, b, c)
    return np.where(hit, t, _POS_INF).view(np.float32)


def intersect_dual_golden(tb, ray, r, rows, ptrs, dual):
    """The loop's default intersect step of the legacy modes: ``image_bvh_dual_intersect_ray``
    of rays ``r`` (in the state ``ray``) on the two nodes ``ptrs`` (uint32 (M,) each; the second
    is ``0x5``, an empty box that is not fetched, where the step has one node), at ``rows`` (the
    second -1 where it is that empty box), by the golden array paths; ``dual``: the descriptor's
    ``wide_sort`` (two boxes sorted together, ``bvh4x2``).

    Returns ``(slots, t)``: the box halves' sorted result pointers (uint32 (M, 8): DW0-7 where
    both nodes are boxes, else DW0-3 or DW4-7 of the box half, ``INVALID_NODE`` in a triangle
    half) and the triangle halves' distances ``t_num / t_den`` as the shader divides them
    (float32 (M, 2), +inf for a miss and in a box half)."""
    m = len(r)
    extent = ray.t_hit[r]
    is_box = [(ptrs[0] & 7) == 5, (ptrs[1] & 7) == 5]
    real_box = [is_box[0], is_box[1] & (rows[1] >= 0)]
    out = np.full((m, 8), _INV, np.uint32)
    anybox = np.nonzero(real_box[0] | real_box[1])[0]
    if len(anybox):
        k = len(anybox)
        ptr8 = np.full((8, k), _INV, np.uint32)
        valid8 = np.zeros((8, k), bool)
        lo8 = np.zeros((8, 3, k), np.float32)
        hi8 = np.zeros((8, 3, k), np.float32)
        for h in (0, 1):
            sel = real_box[h][anybox]
            bi = tb.box_index[rows[h][anybox[sel]]]
            slots = slice(4 * h, 4 * h + 4)
            ptr8[slots, sel] = tb.box_ptr_t[:, bi]
            valid8[slots, sel] = tb.box_valid_t[:, bi]
            lo8[slots][:, :, sel] = tb.box_min_t[:, :, bi]
            hi8[slots][:, :, sel] = tb.box_max_t[:, :, bi]
        ra = r[anybox]
        # the descriptor's wide_sort (bvh4x2) sorts two box nodes together
        wide = (is_box[0] & is_box[1])[anybox] & dual
        out[anybox] = box_slots(
            ptr8,
            valid8,
            lo8,
            hi8,
            np.ascontiguousarray(ray.o[ra].T),
            np.ascontiguousarray(ray.inv[ra].T),
            extent[anybox],
            wide=np.broadcast_to(wide, (k,)),
            dedup=False,
        )
    t_out = np.full((m, 2), np.inf, np.float32)
    for h in (0, 1):
        tri = ~is_box[h]
        if tri.any():
            rt = r[tri]
            t_out[tri, h] = _legacy_tri(
                tb, rows[h][tri], ptrs[h][tri], ray.o[rt], [x[rt] for x in ray.setup]
            )
    return out, t_out


def _legacy_step(tb, ray, r, node, node2, dual, first_hit, probe, walking):
    """One ``image_bvh_dual_intersect_ray`` per ray ``r`` on legacy nodes ``node`` and, where it
    is a node (``dual``), ``node2``, asked of the driver (``("intersect_dual", args, info)``,
    answered as :func:`intersect_dual_golden` answers), and the shader's triangle handling (a
    closer ``t_num / t_den`` becomes the hit; after triangle 1 of a paired node, triangle 0 is
    pushed as the next node). A generator returning ``(data, last, stop, box_tests, tri_tests,
    fetches)``; ``data`` holds the 8 stack slots (slots 4-7 unused by ``push4_pop1``)."""
    m = len(r)
    where = ray.where[r]
    extent = ray.t_hit[r].copy()  # the instruction's extent: the closest hit before this step
    two = ~_special(node2)
    rows = [tb.row(where, node), np.full(m, -1, np.int64)]
    rows[1][two] = tb.row(where[two], node2[two])
    ptrs = [node, np.where(two, node2, np.uint32(_NULL_PTR))]
    is_box = [(node & 7) == 5, ~two | ((node2 & 7) == 5)]
    box_tests = np.zeros(m, np.int64)
    tri_tests = np.zeros(m, np.int64)
    for h in (0, 1):
        sel = is_box[h] & (rows[h] >= 0)
        box_tests[sel] += tb.box_count[tb.box_index[rows[h][sel]]]
    out, t_out = yield ("intersect_dual", (tb, ray, r, rows, ptrs, dual), {"walking": walking})
    data = np.array(out, np.uint32)
    accepted = np.zeros(m, bool)
    for h in (0, 1):
        tri = ~is_box[h]
        if not tri.any():
            continue
        rt, p = r[tri], ptrs[h][tri]
        t = t_out[tri, h]
        tri_tests[tri] += 1
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(t) & (t >= 0) & (t < ray.t_hit[rt].view(np.float32))
        ray.t_hit[rt] = np.where(ok, t.view(np.uint32), ray.t_hit[rt])
        prim = tb.tri_prims[tb.pair_base[rows[h][tri]], (p & 1).astype(np.int64)]
        ray.prim[rt] = np.where(ok, prim, ray.prim[rt])
        accepted[tri] |= ok
        # triangle 1 of a paired node: triangle 0 next, unless the other engine has it
        partner = p & ~np.uint32(7)
        push0 = ((p & 7) == 1) & (partner != ptrs[0][tri]) & (partner != ptrs[1][tri])
        half = np.full((tri.sum(), 4), _INV, np.uint32)
        half[push0, 0] = partner[push0]
        data[tri, 4 * h : 4 * h + 4] = half
    if not dual:
        data[:, 4:] = _INV  # push4_pop1 reads slots 0-3
    if probe is not None:
        probe(
            "dual",
            {
                "ptr": np.stack(ptrs, axis=1),
                "dwords": np.stack(
                    [tb.dwords[rows[0]], np.where(two[:, None], tb.dwords[rows[1]], 0)], axis=1
                ),
                "origin": ray.o[r].copy(),
                "dir": ray.d[r].copy(),
                "extent": extent,
            },
            (out, t_out, is_box),
        )
    stop = accepted if first_hit else np.zeros(m, bool)
    return data, np.full(m, _INV, np.uint32), stop, box_tests, tri_tests, 1 + two


MODES = ("bvh8", "bvh4x2", "bvh4")


def trace(
    tables,
    origins,
    dirs,
    *,
    mode=None,
    tmax=None,
    first_hit=False,
    stack_size=16,
    record=None,
    probe=None,
    intersect=None,
    stack=None,
    schedule=None,
    intersect_dual=None,
):
    """Run the loop for rays ``origins``/``dirs`` (float arrays (N, 3)); a :class:`Result`.

    ``mode``: ``"bvh8"`` (RT IP 3.1: one BVH8 node or triangle pair a step,
    ``ds_bvh_stack_push8_pop1`` with the 3.1 rules; the default for BVH8 tables), ``"bvh4"``
    (RDNA 2/3: one legacy BVH4 node a step with the dual instruction's second node empty,
    ``push4_pop1``; the default for legacy tables) or ``"bvh4x2"`` (two legacy nodes a step,
    sorted together when both are boxes, ``push8_pop2``).

    ``probe(kind, inputs, outputs)``, if given, sees every step's intersect operands (``ptr``,
    ``dwords``, ``origin``, ``dir``, ``extent``: the ray as the accelerator receives it) and what
    the step computed, for checking against the instruction model.

    Executors: the loop's two instructions and its scheduler can be replaced, so that one loop
    serves the golden model and runs on other models of the hardware (the RTL:
    ``sim/experiments/traversal/scale.py``); the shader side (the closest-hit update, the leaf's
    last-node pointer, the instance transition, first-hit termination, the decisions taken from
    the popped node, the walk-back) stays in :func:`steps`, which this function drives.

    * ``intersect(tables, rays, r, rows, ptr, kinds)`` (``bvh8``): the intersect instructions of
      one step, as :func:`intersect_golden` (the default) computes and returns them;
    * ``intersect_dual(tables, rays, r, rows, ptrs, dual)`` (``bvh4``, ``bvh4x2``): the dual
      intersect instructions of one step, as :func:`intersect_dual_golden` (the default);
    * ``stack(r, last, data)``: the stack instructions of one step, as :class:`GoldenStack` (the
      default, with ``stack_size`` entries) takes and answers them; ``pushed`` may be ``None``
      (not observed: the result then has no ``pushes`` counter);
    * ``schedule(active)``: the rays (indices) that run this step, of the active ones (``active``
      (N,) bool); the default runs them all. The loop ends when it returns none.

    The result's counters count per ray, so they do not depend on the schedule."""
    mode = _check(tables, mode, record)
    if mode != "bvh8" and intersect is not None:
        raise ValueError(
            "`intersect` replaces the step of the bvh8 mode only (`intersect_dual`: legacy)"
        )
    if mode == "bvh8" and intersect_dual is not None:
        raise ValueError("`intersect_dual` replaces the step of the legacy modes only")
    executors = {
        "intersect": intersect if intersect is not None else intersect_golden,
        "intersect_dual": intersect_dual if intersect_dual is not None else intersect_dual_golden,
        "stack": stack if stack is not None else GoldenStack(len(origins), stack_size, mode),
    }
    program = steps(
        tables,
        origins,
        dirs,
        mode=mode,
        tmax=tmax,
        first_hit=first_hit,
        record=record,
        probe=probe,
        schedule=schedule,
    )
    return drive(program, executors)


def drive(program, executors):
    """Run ``program`` (a :func:`steps` generator) to its end, answering each request
    ``(kind, args, info)`` with ``executors[kind](*args)``; the program's :class:`Result`."""
    message = next(program)
    while True:
        kind, args, _info = message
        try:
            message = program.send(executors[kind](*args))
        except StopIteration as stop:
            return stop.value


def _check(tb, mode, record):
    if mode is None:
        mode = "bvh4" if tb.legacy else "bvh8"
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {', '.join(MODES)}, not {mode!r}")
    if (mode != "bvh8") != tb.legacy:
        raise ValueError(f"mode {mode!r} does not run {tb.top.encoding} nodes")
    if record is not None and tb.legacy:
        raise ValueError("step records are kept for the bvh8 mode only")
    return mode


def steps(
    tables,
    origins,
    dirs,
    *,
    mode=None,
    tmax=None,
    first_hit=False,
    record=None,
    probe=None,
    schedule=None,
):
    """The traversal loop, every decision of the shader written once, as a generator that leaves
    its instructions to its driver (:func:`drive`, :func:`trace`, the per-wave loop
    :func:`gpurtl.golden.traversal.loop.wave_program`). Arguments as :func:`trace` has them;
    ``schedule(active)`` picks the rays of each step (default: every active ray).

    Each step of the chosen rays ``r`` (ascending indices when the scheduler gives them so)
    yields, and expects the answer of:

    * ``("intersect", (tables, rays, r, rows, ptr, kinds), info)`` (``bvh8``): answered as
      :func:`intersect_golden` answers;
    * ``("intersect_dual", (tables, rays, r, rows, ptrs, dual), info)`` (``bvh4``, ``bvh4x2``):
      answered as :func:`intersect_dual_golden` answers;
    * then ``("stack", (r, last, data), {})`` for the rays that go on: answered as
      :class:`GoldenStack` answers.

    ``info["walking"]``: which of the rays take a walk-back step (the stack had overflowed).
    Returns the :class:`Result`."""
    tb = tables
    mode = _check(tb, mode, record)
    n = len(origins)
    ray = Rays(origins, dirs, tmax)
    node = np.full(n, ROOT_NODE_PTR, np.uint32)
    node2 = np.full(n, _INV, np.uint32)  # bvh4x2: the second node of the step
    walk = np.full(n, _INV, np.uint32)  # the child walked back from, or INVALID (none)
    walking = np.zeros(n, bool)
    active = np.ones(n, bool)
    counts = {name: np.zeros(n, np.int64) for name in COUNTERS}
    pushes_known = True
    rec = [] if record is not None else None
    step = 0
    while True:
        r = np.nonzero(active)[0] if schedule is None else schedule(active)
        if not len(r):
            break
        counts["steps"][r] += 1
        counts["walkback_steps"][r] += walking[r]
        if tb.legacy:
            data, last, stop, box_tests, tri_tests, fetches = yield from _legacy_step(
                tb, ray, r, node[r], node2[r], mode == "bvh4x2", first_hit, probe, walking[r]
            )
            counts["fetches"][r] += fetches
        else:
            rows = tb.row(ray.where[r], node[r])
            data, last, stop, box_tests, tri_tests = yield from _bvh8_step(
                tb, ray, r, rows, node, first_hit, probe, walking[r]
            )
            counts["fetches"][r] += 1
            if rec is not None:
                sel = record[r]
                if sel.any():
                    rec.append(
                        (
                            r[sel],
                            np.full(sel.sum(), step),
                            tb.va[rows[sel]],
                            tb.kind[rows[sel]],
                            box_tests[sel],
                            tri_tests[sel],
                        )
                    )
            counts["instances"][r] += tb.kind[rows] == KIND_INSTANCE
        counts["box_tests"][r] += box_tests
        counts["tri_tests"][r] += tri_tests
        visited = node[r].copy()
        last = np.where(walking[r], walk[r], last)
        # rays ending at their first hit leave before the stack instruction
        if stop.any():
            active[r[stop]] = False
        go = ~stop
        r, data, last, visited = r[go], data[go], last[go], visited[go]
        first, second, pushed, overflowed, b2t = yield ("stack", (r, last, data), {})
        if pushed is None:
            pushes_known = False
        else:
            counts["pushes"][r] += pushed
        if mode == "bvh4x2":
            counts["pops"][r] += 1 + ~_special(second)
        else:
            counts["pops"][r] += 1
        counts["overflows"][r] += overflowed
        ray.to_world(r[b2t])
        done = first == np.uint32(TERMINAL_NODE)
        active[r[done]] = False
        lost = first == _INV
        # stackless walk-back: from the node just visited to its parent
        rl = r[lost]
        src = visited[lost]
        par = tb.parent_ptr[tb.row(ray.where[rl], src)]
        # the root of a BLAS: back to the TLAS, to the instance's parent box
        blas_root = (par == _INV) & (ray.where[rl] != 0)
        if blas_root.any():
            rr = rl[blas_root]
            src[blas_root] = tb.inst_ptr[ray.inst[rr]]
            ray.to_world(rr)
            par[blas_root] = tb.parent_ptr[tb.row(ray.where[rr], src[blas_root])]
        ends = par == _INV
        active[rl[ends]] = False
        keep = ~ends
        rk = rl[keep]
        walk[rk] = tb.slot_ptr[tb.row(ray.where[rk], src[keep])]
        walking[rk] = True
        node[rk], node2[rk] = par[keep], _INV
        ok = ~done & ~lost
        ro = r[ok]
        walking[ro] = False
        node[ro], node2[ro] = first[ok], second[ok]
        step += 1
        if step > 100000 and counts["steps"].max() > 100000:
            raise RuntimeError("traversal loop does not terminate")
    res = Result()
    t = ray.t_hit.view(np.float32).astype(np.float64)
    res.t = np.where(ray.prim >= 0, t, np.inf)
    res.prim, res.inst = ray.prim, ray.hit_inst
    if not pushes_known:
        del counts["pushes"]
    res.counts = counts
    if rec is not None:
        cols = list(zip(*rec)) if rec else [[]] * 6
        names = ("ray", "step", "va", "kind", "box_tests", "tri_tests")
        for name, col in zip(names, cols):
            setattr(res, "rec_" + name, np.concatenate(col) if len(col) else np.zeros(0, np.int64))
    return res
