"""Wide BVHs for large meshes: triangle pairing, a level-by-level binned-SAH binary build, the
SAH-optimal collapse to 8- or 4-wide nodes and a vectorised BVH8 node encoder.

The same nodes as :mod:`.builder` (it reuses its :class:`~.builder.Bvh`, :class:`~.builder.BoxNode`
and :class:`~.builder.Leaf`, its layout, its OBB choice and its primitive-node packing), built
fast enough for scenes of 10^5 triangles.

Primitives are triangle *pairs* (:func:`pair_triangles`): two triangles sharing an edge where the
mesh has one, else a single triangle. RDNA 2/3 legacy BVH4 leaves are paired triangle nodes (one
64-byte node holds ``(v0, v1, v2)`` and ``(v1, v3, v2)``, gpurt ``gfx10/TriangleNode1_0.hlsli``);
RT IP 3.1 compressed primitive nodes hold up to 8 pairs (Chips and Cheese, "RDNA 4's Raytracing
Improvements", 2025). Building every width over the same pairs keeps the leaf content comparable:
a BVH4 leaf is one pair, a BVH8 leaf holds up to ``leaf_pairs`` pairs.

Collapse (:func:`collapse_sah`): the dynamic program of Ylitie, Karras and Laine, "Efficient
Incoherent Ray Traversal on GPUs Through Compressed Wide BVHs" (HPG 2017): for every binary node
``n`` and slot count ``i`` the cheapest way to hold the subtree in at most ``i`` child slots of a
wide node, where a slot is a leaf (cost ``area * steps of its pairs``) or a wide box node (cost
``area * 1 + its children``). Costs count accelerator steps: one per box node and one per triangle
pair (BVH8, both triangles in one step) or per triangle (legacy BVH4, one triangle a step). Unlike
the greedy collapse of :func:`.builder.collapse`, this fills nodes and merges small subtrees into
leaves where the surface-area cost says so.
"""

import numpy as np

from gpurtl.facts.ray_accel import INVALID_OBB

from . import builder as B

__all__ = [
    "PairSet",
    "build_binary_arrays",
    "build_wide",
    "build_wide_tlas",
    "collapse_sah",
    "encode_box8_rows",
    "pair_triangles",
    "sah_cost",
    "tree_stats",
]


class PairSet:
    """Triangle pairs of a mesh: ``tris`` (P, 2) triangle indices (``-1``: no second triangle);
    ``shared`` (P,) whether the two share an edge (then ``tris[:, 0]``'s vertices are rotated so
    the shared edge is its ``v1 -> v2``: ``order0`` (P, 3) is its vertex order)."""

    def __init__(self, tris, shared, order0):
        self.tris, self.shared, self.order0 = tris, shared, order0

    def __len__(self):
        return len(self.tris)


def pair_triangles(mesh):
    """Greedy edge pairing in mesh order: each triangle takes the first unpaired neighbour across
    one of its edges ``(a, b), (b, c), (c, a)``."""
    f = mesh.faces
    n = len(f)
    edges = np.stack([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]], axis=1)  # (n, 3, 2)
    key = np.sort(edges, axis=2).reshape(-1, 2)
    ek = key[:, 0].astype(np.int64) * (int(f.max()) + 1 if n else 1) + key[:, 1]
    order = np.argsort(ek, kind="stable")
    sk = ek[order]
    # neighbour of each (triangle, edge) slot: the other slot with the same key, if exactly two
    nb = np.full(3 * n, -1, np.int64)
    same_next = np.zeros(len(sk), bool)
    same_next[:-1] = sk[:-1] == sk[1:]
    first = np.nonzero(same_next)[0]
    ok = np.ones(len(first), bool)
    ok &= (first + 2 >= len(sk)) | (sk[np.minimum(first + 2, len(sk) - 1)] != sk[first])
    ok &= (first == 0) | (sk[np.maximum(first - 1, 0)] != sk[first])
    a, b = order[first[ok]], order[first[ok] + 1]
    nb[a], nb[b] = b // 3, a // 3
    nb = nb.reshape(n, 3)
    taken = np.zeros(n, bool)
    tris, shared, order0 = [], [], []
    rot = ((0, 1, 2), (1, 2, 0), (2, 0, 1))
    nb_list = nb.tolist()
    for t in range(n):
        if taken[t]:
            continue
        taken[t] = True
        partner = -1
        for e, other in enumerate(nb_list[t]):
            if other >= 0 and not taken[other]:
                partner = other
                # the shared edge is edge e = (v_e, v_e+1): rotate so it becomes v1 -> v2
                order0.append(rot[(e + 2) % 3])
                break
        if partner < 0:
            order0.append(rot[0])
            tris.append((t, -1))
            shared.append(False)
            continue
        taken[partner] = True
        tris.append((t, partner))
        shared.append(True)
    return PairSet(
        np.array(tris, np.int64).reshape(-1, 2),
        np.array(shared, bool),
        np.array(order0, np.int64).reshape(-1, 3),
    )


# --- binary build -------------------------------------------------------------------------------


def build_binary_arrays(lo, hi, *, bins=16, groups=None):
    """Binned-SAH binary tree down to single primitives, built one level at a time over all open
    nodes at once (the same split rule as :func:`.builder.build_binary`: ``bins`` bins per axis,
    the split minimising ``SA(left) * n_left + SA(right) * n_right``, split by index when all
    centroids coincide).

    Returns a dict of arrays: ``lo``, ``hi`` (M, 3), ``left``, ``right`` (M,; -1 for leaves),
    ``start``, ``count`` (M,: the node's primitives are ``order[start:start + count]``), ``order``
    (N,) and ``parent`` (M,). ``groups``: primitive counts of several trees built at once (a
    forest, each group's primitives contiguous); their roots are nodes ``0 .. len(groups) - 1``.
    """
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    n = len(lo)
    cen = 0.5 * (lo + hi)
    order = np.arange(n)
    groups = np.array([n] if groups is None else groups, np.int64)
    g = len(groups)
    cap = max(1, 2 * n + g)
    t_lo = np.zeros((cap, 3))
    t_hi = np.zeros((cap, 3))
    left = np.full(cap, -1, np.int64)
    right = np.full(cap, -1, np.int64)
    start = np.zeros(cap, np.int64)
    count = np.zeros(cap, np.int64)
    parent = np.full(cap, -1, np.int64)
    count[:g] = groups
    start[:g] = np.concatenate([[0], np.cumsum(groups)[:-1]])
    used = g
    for r in range(g):
        if groups[r]:
            t_lo[r] = lo[start[r] : start[r] + groups[r]].min(axis=0)
            t_hi[r] = hi[start[r] : start[r] + groups[r]].max(axis=0)
    open_nodes = np.nonzero(groups > 1)[0]
    while len(open_nodes):
        s, c = start[open_nodes], count[open_nodes]
        m = len(open_nodes)
        seg = np.repeat(np.arange(m), c)
        idx = order[np.concatenate([np.arange(a, a + k) for a, k in zip(s, c)])]
        pc = cen[idx]
        cmin = np.minimum.reduceat(pc, np.concatenate([[0], np.cumsum(c)[:-1]]), axis=0)
        cmax = np.maximum.reduceat(pc, np.concatenate([[0], np.cumsum(c)[:-1]]), axis=0)
        best_cost = np.full(m, np.inf)
        best_axis = np.full(m, -1, np.int64)
        best_k = np.zeros(m, np.int64)
        bin_of = np.zeros((3, len(idx)), np.int64)
        for axis in range(3):
            span = cmax[:, axis] - cmin[:, axis]
            with np.errstate(divide="ignore", invalid="ignore"):
                b = ((pc[:, axis] - cmin[seg, axis]) / span[seg] * bins).astype(np.int64)
            b = np.where(span[seg] > 0, np.clip(b, 0, bins - 1), 0)
            bin_of[axis] = b
            key = seg * bins + b
            cnt = np.bincount(key, minlength=m * bins).reshape(m, bins)
            blo = np.full((m * bins, 3), np.inf)
            bhi = np.full((m * bins, 3), -np.inf)
            srt = np.argsort(key, kind="stable")
            ks = key[srt]
            heads = np.concatenate([[0], np.nonzero(ks[1:] != ks[:-1])[0] + 1])
            blo[ks[heads]] = np.minimum.reduceat(lo[idx[srt]], heads, axis=0)
            bhi[ks[heads]] = np.maximum.reduceat(hi[idx[srt]], heads, axis=0)
            blo, bhi = blo.reshape(m, bins, 3), bhi.reshape(m, bins, 3)
            llo = np.minimum.accumulate(blo, axis=1)
            lhi = np.maximum.accumulate(bhi, axis=1)
            rlo = np.minimum.accumulate(blo[:, ::-1], axis=1)[:, ::-1]
            rhi = np.maximum.accumulate(bhi[:, ::-1], axis=1)[:, ::-1]
            nl = np.cumsum(cnt, axis=1)
            cost = B.surface_area(llo[:, :-1], lhi[:, :-1]) * nl[:, :-1] + B.surface_area(
                rlo[:, 1:], rhi[:, 1:]
            ) * (c[:, None] - nl[:, :-1])
            cost = np.where((nl[:, :-1] > 0) & (nl[:, :-1] < c[:, None]), cost, np.inf)
            k = np.argmin(cost, axis=1)
            kc = cost[np.arange(m), k]
            better = kc < best_cost
            best_cost = np.where(better, kc, best_cost)
            best_axis = np.where(better, axis, best_axis)
            best_k = np.where(better, k, best_k)
        # side of every primitive; no valid split: split by index (first half left)
        pos = np.arange(len(idx)) - np.repeat(np.concatenate([[0], np.cumsum(c)[:-1]]), c)
        by_bin = bin_of[np.maximum(best_axis[seg], 0), np.arange(len(idx))] <= best_k[seg]
        go_left = np.where(best_axis[seg] >= 0, by_bin, pos < (c[seg] // 2))
        srt = np.lexsort((~go_left, seg))
        new_idx = idx[srt]
        flat = np.concatenate([np.arange(a, a + k) for a, k in zip(s, c)])
        order[flat] = new_idx
        nl = np.bincount(seg, weights=go_left, minlength=m).astype(np.int64)
        lid = used + 2 * np.arange(m)
        rid = lid + 1
        used += 2 * m
        left[open_nodes], right[open_nodes] = lid, rid
        parent[lid], parent[rid] = open_nodes, open_nodes
        start[lid], count[lid] = s, nl
        start[rid], count[rid] = s + nl, c - nl
        # bounds of the new nodes
        kids = np.concatenate([lid, rid])
        ks, kc = start[kids], count[kids]
        kidx = order[np.concatenate([np.arange(a, a + k) for a, k in zip(ks, kc)])]
        heads = np.concatenate([[0], np.cumsum(kc)[:-1]])
        t_lo[kids] = np.minimum.reduceat(lo[kidx], heads, axis=0)
        t_hi[kids] = np.maximum.reduceat(hi[kidx], heads, axis=0)
        open_nodes = kids[kc > 1]
    return {
        "lo": t_lo[:used],
        "hi": t_hi[:used],
        "left": left[:used],
        "right": right[:used],
        "start": start[:used],
        "count": count[:used],
        "order": order,
        "parent": parent[:used],
        "roots": np.arange(g),
    }


# --- SAH collapse -------------------------------------------------------------------------------


def collapse_sah(tree, width, leaf_steps, leaf_max):
    """Optimal collapse (module doc string). ``leaf_steps(count)`` gives the accelerator steps of a
    leaf of ``count`` primitives (vectorised), ``leaf_max`` the most primitives per leaf.

    ``leaf_steps`` is an array of the steps of every binary node as a leaf.

    Returns ``(wide, roots, costs)``: ``wide`` a list of wide box nodes, each a list of
    ``("box", wide index)`` or ``("leaf", binary node)`` children, the wide index of each tree's
    root, and each tree's SAH cost (sum over its nodes of area times steps, divided by the root
    area: the expected accelerator steps of a ray through the root box, by the usual SAH
    assumption of uniformly distributed rays).
    """
    left, right, count = tree["left"], tree["right"], tree["count"]
    m = len(left)
    area = B.surface_area(tree["lo"], tree["hi"])
    # heights, bottom-up order
    height = np.zeros(m, np.int64)
    is_inner = left >= 0
    order = np.argsort(-np.arange(m))  # children have larger indices than parents
    for node in order:
        if is_inner[node]:
            height[node] = 1 + max(height[left[node]], height[right[node]])
    w = width
    cost = np.full((m, w + 1), np.inf)
    # choice[n, i]: 0 = same as i-1, k>0 = split k|i-k; choice1[n]: True = leaf at one slot
    choice = np.zeros((m, w + 1), np.int64)
    as_leaf = np.zeros(m, bool)
    leaf_cost = np.where(count <= leaf_max, area * leaf_steps, np.inf)
    for h in range(int(height.max()) + 1 if m else 0):
        nodes = np.nonzero(height == h)[0]
        if h == 0:
            cost[nodes, 1:] = leaf_cost[nodes, None]
            as_leaf[nodes] = True
            continue
        lch, rch = left[nodes], right[nodes]
        dist = np.full((len(nodes), w + 1), np.inf)
        arg = np.zeros((len(nodes), w + 1), np.int64)
        for j in range(2, w + 1):
            for k in range(1, j):
                cand = cost[lch, k] + cost[rch, j - k]
                better = cand < dist[:, j]
                dist[:, j] = np.where(better, cand, dist[:, j])
                arg[:, j] = np.where(better, k, arg[:, j])
        inner = area[nodes] * 1.0 + dist[:, w]
        leaf = leaf_cost[nodes]
        take_leaf = leaf <= inner
        as_leaf[nodes] = take_leaf
        cost[nodes, 1] = np.minimum(leaf, inner)
        choice[nodes, w] = 0
        for i in range(2, w + 1):
            better = dist[:, i] < cost[nodes, i - 1]
            cost[nodes, i] = np.where(better, dist[:, i], cost[nodes, i - 1])
            choice[nodes, i] = np.where(better, arg[:, i], 0)
        # the wide node's own children use the best distribution over all w slots
        choice[nodes, 0] = arg[:, w]
        # remember the distribution with exactly w slots for expansion of inner nodes
        tree.setdefault("_dist_w", np.zeros(m, np.int64))[nodes] = arg[:, w]

    def expand(node, slots, out):
        while slots > 1 and choice[node, slots] == 0:
            slots -= 1
        if slots == 1:
            out.append(node)
            return
        k = choice[node, slots]
        expand(left[node], k, out)
        expand(right[node], slots - k, out)

    wide = []

    def make(node):
        index = len(wide)
        wide.append(None)
        kids = []
        if not is_inner[node]:
            kids = [node]
        else:
            k = tree["_dist_w"][node]
            expand(left[node], k, kids)
            expand(right[node], w - k, kids)
        entries = []
        for kid in kids:
            if as_leaf[kid]:
                entries.append(("leaf", kid))
            else:
                entries.append(("box", make(kid)))
        wide[index] = entries
        return index

    roots, costs = [], []
    for r in tree["roots"]:
        roots.append(make(int(r)))
        if is_inner[r]:
            k = tree["_dist_w"][r]
            total = area[r] + cost[left[r], k] + cost[right[r], w - k]
        else:
            total = area[r] + leaf_cost[r]
        costs.append(float(total / area[r]) if area[r] > 0 else float("nan"))
    return wide, roots, costs


# --- vectorised node encoders -----------------------------------------------------------------


def _two_sum_exact(a, b):
    """``a - b`` in float64 and whether it is exact (Knuth's TwoSum error is zero)."""
    s = a - b
    bb = s - a
    err = (a - (s - bb)) + (-b - bb)
    return s, err == 0


def _round_f32(x, up):
    """float64 values rounded to float32 towards +inf (``up``) or -inf, as float64."""
    with np.errstate(over="ignore"):
        f = x.astype(np.float32).astype(np.float64)
        nudge = np.nextafter(x.astype(np.float32), np.float32(np.inf if up else -np.inf)).astype(
            np.float64
        )
    wrong = (f < x) if up else (f > x)
    return np.where(wrong, nudge, f)


def _quantize(mins, maxs, valid):
    """:func:`gpurtl.golden.ray_accel.encode.box_node.quantize_axis` for every node and axis at once.
    ``mins``/``maxs`` float32 (M, 8, 3). Returns ``origin`` float32 (M, 3), ``exp`` (M, 3),
    ``qmin``, ``qmax`` (M, 8, 3) and ``exact`` (M, 3): False where float64 could not hold an
    intermediate value exactly (the caller then uses the scalar encoder)."""
    m = mins.shape[0]
    big = np.float32(np.inf)
    masked = np.where(valid[..., None], mins, big)
    first = np.argmin(masked, axis=1)  # first child holding the minimum (as ``min`` does)
    origin = np.take_along_axis(mins, first[:, None, :], axis=1)[:, 0, :]
    top = np.max(np.where(valid[..., None], maxs, -big), axis=1)
    o = origin.astype(np.float64)
    ext, ok = _two_sum_exact(top.astype(np.float64), o)
    extent = _round_f32(ext, True).astype(np.float32).view(np.uint32).astype(np.int64)
    exact = ok & np.isfinite(ext) & (extent < 0x7F000000)
    e = ((extent + 0x7FFFFF) >> 23) & 0xFF
    zero = e == 0
    e = np.maximum(13, e)
    rcp = np.exp2((139 - e).astype(np.float64))[:, None, :]
    lo_d, ok_lo = _two_sum_exact(mins.astype(np.float64), o[:, None, :])
    hi_d, ok_hi = _two_sum_exact(maxs.astype(np.float64), o[:, None, :])
    a = _round_f32(_round_f32(lo_d, False) * rcp, False)
    b = _round_f32(_round_f32(hi_d, True) * rcp, True)
    with np.errstate(invalid="ignore"):
        qmin = np.clip(np.floor(a), 0, 4095)
        qmax = np.clip(np.ceil(b), 1, 4096) - 1
    qmin = np.where(np.isfinite(qmin), qmin, 0).astype(np.int64)
    qmax = np.where(np.isfinite(qmax), qmax, 0).astype(np.int64)
    exact &= np.all((ok_lo & ok_hi) | ~valid[..., None], axis=1)
    qmin = np.where(zero[:, None, :], 0, qmin)
    qmax = np.where(zero[:, None, :], 0, qmax)
    e = np.where(zero, 0, e)
    del m
    return origin, e, qmin, qmax, exact


_INVALID_INFO = np.array([0xFFFFFFFF, 0x00000FFF, 0], np.uint32)


def _child_infos(qmin, qmax, types, ranges, valid, mask=0xFF):
    """ChildInfo dwords (M, S, 3) (gpurt ``gfx12/childInfo.hlsl``); invalid slots get the
    invalid record."""
    q0, q1 = qmin.astype(np.uint32), qmax.astype(np.uint32)
    w0 = q0[..., 0] | (q0[..., 1] << 12)
    w1 = q0[..., 2] | (q1[..., 0] << 12) | (np.uint32(mask) << 24)
    w2 = q1[..., 1] | (q1[..., 2] << 12) | (types.astype(np.uint32) << 24)
    w2 |= ranges.astype(np.uint32) << 28
    info = np.stack([w0, w1, w2], axis=-1).astype(np.uint32)
    return np.where(valid[..., None], info, _INVALID_INFO)


def encode_box8_rows(mins, maxs, count, types, ranges, internal_base, leaf_base, obb):
    """32-dword BVH8 box nodes (M, 32) of child boxes ``mins``/``maxs`` float32 (M, 8, 3) (the
    first ``count`` valid), child ``types``/``ranges`` (M, 8), base pointers and OBB indices
    (M,), with ``parent = 0xFFFFFFFF`` and ``index_in_parent = 0``: row for row what
    :func:`gpurtl.golden.ray_accel.encode.box_node.encode_box8` writes for the same arguments (rows the
    float64 path cannot quantize exactly are handed to it)."""
    from gpurtl.golden.ray_accel.encode import box_node

    m = mins.shape[0]
    valid = np.arange(8)[None, :] < count[:, None]
    origin, e, qmin, qmax, exact = _quantize(mins, maxs, valid)
    out = np.zeros((m, 32), np.uint32)
    out[:, 0] = internal_base
    out[:, 1] = leaf_base
    out[:, 2] = 0xFFFFFFFF
    out[:, 3:6] = origin.view(np.uint32)
    e32 = e.astype(np.uint32)
    out[:, 6] = (
        e32[:, 0] | (e32[:, 1] << 8) | (e32[:, 2] << 16) | ((count - 1).astype(np.uint32) << 28)
    )
    out[:, 7] = np.asarray(obb, np.uint32) & 0x7F
    out[:, 8:] = _child_infos(qmin, qmax, types, ranges, valid).reshape(m, 24)
    for r in np.nonzero(~np.all(exact, axis=1))[0]:
        k = int(count[r])
        out[r] = box_node.encode_box8(
            [
                {
                    "min": [float(v) for v in mins[r, i]],
                    "max": [float(v) for v in maxs[r, i]],
                    "type": int(types[r, i]),
                    "range": int(ranges[r, i]),
                }
                for i in range(k)
            ],
            internal_base=int(internal_base[r]),
            leaf_base=int(leaf_base[r]),
            obb_index=int(obb[r]),
        )
    return out


def encode_instance_rows(w2o, child_base, user_data, root_lo, root_hi, mask=0xFF):
    """Instance nodes (M, 32) with a one-child filter box around the BLAS root box: what
    :func:`gpurtl.golden.ray_accel.scalar.instance.encode_instance` writes for the filter fields
    :func:`.builder.build_tlas` passes (``w2o`` float32 (M, 3, 4), ``child_base`` uint64)."""
    m = len(child_base)
    f = encode_box8_rows(
        np.repeat(root_lo.astype(np.float32)[:, None, :], 8, axis=1),
        np.repeat(root_hi.astype(np.float32)[:, None, :], 8, axis=1),
        np.ones(m, np.int64),
        np.full((m, 8), 5),
        np.zeros((m, 8), np.int64),
        np.zeros(m, np.uint32),
        np.zeros(m, np.uint32),
        np.full(m, INVALID_OBB),
    )
    out = np.zeros((m, 32), np.uint32)
    out[:, 0:12] = np.asarray(w2o, np.float32).reshape(m, 12).view(np.uint32)
    cb = np.asarray(child_base, np.uint64)
    out[:, 12] = (cb & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    out[:, 13] = (cb >> np.uint64(32)).astype(np.uint32)
    out[:, 14] = 0
    out[:, 15] = (np.asarray(user_data, np.uint32) & 0xFFFFFF) | (np.uint32(mask) << 24)
    out[:, 16:19] = f[:, 3:6]
    out[:, 19] = f[:, 6] & 0xFFFFFF  # one filter child: count_minus_1 = 0
    out[:, 20:23] = f[:, 8:11]
    out[:, 23:32] = np.tile(_INVALID_INFO, 3)
    return out


# --- building -----------------------------------------------------------------------------------


def _pair_bounds(tris, pairs):
    t0 = tris[pairs.tris[:, 0]]
    second = pairs.tris[:, 1]
    t1 = np.where((second >= 0)[:, None, None], tris[np.maximum(second, 0)], t0)
    return np.minimum(t0.min(axis=1), t1.min(axis=1)), np.maximum(t0.max(axis=1), t1.max(axis=1))


def _leaf_tris(pairs, pair_ids):
    """Triangle indices of a leaf of pairs: complete pairs first, then lone triangles (so the
    primitive-node packer, which pairs consecutive triangles, keeps every pair together)."""
    full = [t for p in pair_ids if pairs.tris[p, 1] >= 0 for t in pairs.tris[p]]
    lone = [pairs.tris[p, 0] for p in pair_ids if pairs.tris[p, 1] < 0]
    return np.array(full + lone, np.int64)


def _wide_objects(tree, wide, root, make_leaf):
    """builder BoxNode/Leaf objects of wide node ``root`` (boxes first, as gpurt orders them)."""

    def box(index, node_lo, node_hi):
        kids = []
        for kind, ref in wide[index]:
            if kind == "leaf":
                kids.append(make_leaf(ref))
            else:
                kids.append(("box", ref))
        children = []
        for k in kids:
            if isinstance(k, tuple):
                children.append(k)
            else:
                children.append(k)
        return children

    # iterative construction keeps deep trees off the Python stack
    def build(index):
        entries = wide[index]
        children = []
        for kind, ref in entries:
            if kind == "leaf":
                children.append(make_leaf(ref))
            else:
                children.append(build(ref))
        children.sort(key=lambda c: 0 if c.kind == "box" else 1)
        lo = np.min([c.lo for c in children], axis=0)
        hi = np.max([c.hi for c in children], axis=0)
        return B.BoxNode(children, lo, hi)

    del box
    return build(root)


def _rot_bounds_leaves(bvh, tris):
    """OBB rotated bounds (104, 3) of every leaf and box (bottom-up), for the OBB choice."""
    for leaf in bvh.leaves:
        pts = tris[leaf.prims].reshape(-1, 3)
        leaf.rot_lo, leaf.rot_hi = B._rotated_bounds(pts)
    for box in reversed(bvh.boxes):
        box.rot_lo = np.min([c.rot_lo for c in box.children], axis=0)
        box.rot_hi = np.max([c.rot_hi for c in box.children], axis=0)


def build_wide(mesh, *, width=8, leaf_pairs=4, obb_threshold=None, pairs=None, bins=16):
    """A BLAS over ``mesh``'s triangle pairs: ``width`` 8 (RT IP 3.1 BVH8 quantized nodes,
    leaves of up to ``leaf_pairs`` pairs in compressed primitive nodes) or 4 (legacy FP32 BVH4,
    every leaf one paired triangle node). ``obb_threshold`` (e.g.
    :data:`.builder.OBB_THRESHOLD`) switches OBBs on. The returned :class:`.builder.Bvh` also
    has ``sah_cost`` (expected steps per ray by the SAH) and ``pairs``."""
    if width not in (4, 8):
        raise ValueError(f"`width` must be 4 or 8, not {width!r}")
    if width == 8 and not 1 <= leaf_pairs <= 8:
        raise ValueError(f"`leaf_pairs` must be 1..8 (one primitive node), not {leaf_pairs!r}")
    pairs = pair_triangles(mesh) if pairs is None else pairs
    tris = mesh.triangles.astype(np.float64)
    lo, hi = _pair_bounds(tris, pairs)
    tree = build_binary_arrays(lo, hi, bins=bins)
    count = tree["count"]
    if width == 8:
        leaf_max, steps = leaf_pairs, count.astype(np.float64)
    else:
        # a legacy pair takes two single-triangle steps
        ntri = 1 + (pairs.tris[:, 1] >= 0)
        leaf_max = 1
        steps = np.where(count == 1, ntri[tree["order"][tree["start"]]], np.inf).astype(float)
    wide, roots, costs = collapse_sah(tree, width, steps, leaf_max)
    order = tree["order"]

    def make_leaf(node):
        ids = order[tree["start"][node] : tree["start"][node] + tree["count"][node]]
        leaf = B.Leaf(_leaf_tris(pairs, ids), tree["lo"][node], tree["hi"][node])
        leaf.pair_ids = ids
        return leaf

    root = _wide_objects(tree, wide, roots[0], make_leaf)
    bvh = B.Bvh(root, width, mesh=mesh)
    with_obb = obb_threshold is not None
    if with_obb:
        _rot_bounds_leaves(bvh, tris)
    for box in bvh.boxes:
        B._choose_obb(box, obb_threshold)
    if width == 8:
        _encode_bvh8(bvh)
    else:
        _encode_bvh4_pairs(bvh, pairs)
    bvh.sah_cost = costs[0]
    bvh.pairs = pairs
    return bvh


def _encode_boxes8(bvh):
    """Every box node of a laid-out BVH8 through :func:`encode_box8_rows` (one call)."""
    boxes = bvh.boxes
    m = len(boxes)
    mins = np.zeros((m, 8, 3), np.float32)
    maxs = np.zeros((m, 8, 3), np.float32)
    count = np.zeros(m, np.int64)
    types = np.zeros((m, 8), np.int64)
    ranges = np.zeros((m, 8), np.int64)
    ib = np.zeros(m, np.uint32)
    lb = np.zeros(m, np.uint32)
    obb = np.zeros(m, np.int64)
    for r, box in enumerate(boxes):
        k = len(box.children)
        count[r] = k
        mins[r, :k], maxs[r, :k] = box.child_lo, box.child_hi
        mins[r, k:], maxs[r, k:] = mins[r, 0], maxs[r, 0]
        kinds = [c.kind for c in box.children]
        types[r, :k] = [5 if t == "box" else (6 if t == "instance" else 0) for t in kinds]
        ranges[r, :k] = [len(getattr(c, "nodes", None) or [None]) for c in box.children]
        first_box = next((c for c in box.children if c.kind == "box"), None)
        first_leaf = next((c for c in box.children if c.kind != "box"), None)
        ib[r] = (first_box.offset >> 3) if first_box is not None else 0
        lb[r] = (first_leaf.offset >> 3) if first_leaf is not None else 0
        obb[r] = box.obb
    dwords = encode_box8_rows(mins, maxs, count, types, ranges, ib, lb, obb)
    for r, box in enumerate(boxes):
        box.dwords = dwords[r].tolist()
        B.place_box8(bvh, box)


def _encode_bvh8(bvh):
    """:func:`.builder.encode_bvh8` with the box nodes encoded in one vectorised call."""
    if bvh.mesh is not None:
        _encode_leaves_direct(bvh)
    B._layout(bvh, 128, lambda c: 128 * len(getattr(c, "nodes", None) or [None]))
    _encode_boxes8(bvh)
    bvh.encoding = "bvh8"
    return bvh


def _encode_bvh4_pairs(bvh, pairs):
    """Legacy BVH4: box nodes by :func:`.builder.encode_boxes4`, each leaf one 64-byte paired
    triangle node (``(v0, v1, v2)`` and ``(v1, v3, v2)``, the shared edge ``v1 -> v2``); its
    pointer has type 1 (triangle 1 of the pair) when the node holds two triangles, else 0."""
    from gpurtl.golden.ray_accel.encode import primitive_node as pn
    from gpurtl.golden.ray_accel.encode.ray import node_dwords

    faces, verts = bvh.mesh.faces, bvh.mesh.vertices
    B._layout(bvh, 128, lambda c: 64)
    for leaf in bvh.leaves:
        (p,) = leaf.pair_ids
        t0, t1 = pairs.tris[p]
        a, b, c = faces[t0][pairs.order0[p]]
        if t1 >= 0:
            d = [v for v in faces[t1] if v not in (b, c)][0]
            quad = [a, b, c, d]
            leaf.pair_type = 1
        else:
            quad = [a, b, c, c]
            leaf.pair_type = 0
        v = [tuple(float(x) for x in verts[k]) for k in quad]
        leaf.nodes = [
            node_dwords(pn.encode_legacy_node(v, prim_index=(int(t0), int(max(t1, 0)))))[:16]
        ]
        leaf.legacy_tris = (int(t0), int(t1))
        bvh.image[leaf.offset] = leaf.nodes[0]
    B.encode_boxes4(bvh, lambda c: c.pair_type)
    return bvh


def sah_cost(bvh):
    """SAH cost of a built wide BVH in accelerator steps per ray through the root box: the sum
    over box nodes of their area (one step each) and over leaves of area times steps (pairs for
    BVH8, triangles for legacy BVH4), over the root area."""
    root_area = float(B.surface_area(bvh.root.lo, bvh.root.hi))
    total = sum(float(B.surface_area(b.lo, b.hi)) for b in bvh.boxes)
    for leaf in bvh.leaves:
        if leaf.kind != "leaf":
            continue
        steps = -(-len(leaf.prims) // 2) if bvh.width == 8 else len(leaf.prims)
        total += float(B.surface_area(leaf.lo, leaf.hi)) * steps
    return total / root_area if root_area > 0 else float("nan")


def tree_stats(bvh):
    """Node fill, leaf sizes and SAH cost of a built BVH (BLAS)."""
    leaves = [leaf for leaf in bvh.leaves if leaf.kind == "leaf"]
    sizes = np.array([len(leaf.prims) for leaf in leaves])
    nodes = np.array([len(getattr(leaf, "nodes", None) or [None]) for leaf in leaves])
    fill = np.array([len(b.children) for b in bvh.boxes])
    return {
        "triangles": int(sizes.sum()),
        "box_nodes": len(bvh.boxes),
        "leaves": len(leaves),
        "mean_children": float(fill.mean()),
        "full_nodes": float((fill == bvh.width).mean()),
        "mean_leaf_tris": float(sizes.mean()),
        "max_leaf_tris": int(sizes.max()),
        "leaf_size_hist": np.bincount(sizes).tolist(),
        "primitive_nodes": int(nodes.sum()),
        "obb_nodes": bvh.obb_nodes,
        "bytes": int(bvh.size),
        "sah_cost": sah_cost(bvh),
    }


def _encode_leaves_direct(bvh):
    """:func:`.builder.encode_leaves`, first trying the leaf's pairs in one primitive node (what
    the greedy packer ends with whenever they fit, without its one trial encoding per pair)."""
    from gpurtl.golden.ray_accel.encode import primitive_node as pn
    from gpurtl.golden.ray_accel.encode.ray import node_dwords

    tris = bvh.mesh.triangles
    for leaf in bvh.leaves:
        if leaf.kind != "leaf":
            continue
        t = [
            pn.Triangle(tuple(tuple(float(c) for c in v) for v in tris[p]), prim_id=int(p))
            for p in leaf.prims
        ]
        pairs = [
            pn.TrianglePair(t[k], t[k + 1] if k + 1 < len(t) else None) for k in range(0, len(t), 2)
        ]
        try:
            if len(pairs) > pn.MAX_PAIRS:
                raise ValueError("too many pairs")
            packed = [(pn.encode_primitive_node(pairs), None)]
            where = [
                (p, k) for p, pair in enumerate(pairs) for k in range(1 + (pair.tri1 is not None))
            ]
            packed[0] = (packed[0][0], where)
        except ValueError:
            packed = pn.pack_triangles(t)
        leaf.nodes = [node_dwords(node) for node, _ in packed]
        leaf.where = [(k, pair, tri) for k, (_, w) in enumerate(packed) for pair, tri in w]


def build_wide_tlas(instances, *, leaf_pairs=4, bins=16):
    """A two-level scene: one BVH8 BLAS per distinct mesh (all built at once as a forest) and a
    BVH8 TLAS over ``instances`` (a list of ``(mesh, object_to_world 3x4)``; meshes are shared by
    identity). Each BLAS gets its own VA range; the TLAS has ``blas_va`` and ``instances`` as
    :func:`.builder.build_tlas` gives them."""
    meshes, index = [], {}
    for mesh, _ in instances:
        if id(mesh) not in index:
            index[id(mesh)] = len(meshes)
            meshes.append(mesh)
    # the forest of BLAS binary trees
    all_pairs, lo_parts, hi_parts = [], [], []
    for mesh in meshes:
        pairs = pair_triangles(mesh)
        all_pairs.append(pairs)
        lo, hi = _pair_bounds(mesh.triangles.astype(np.float64), pairs)
        lo_parts.append(lo)
        hi_parts.append(hi)
    groups = [len(p) for p in all_pairs]
    tree = build_binary_arrays(
        np.concatenate(lo_parts), np.concatenate(hi_parts), bins=bins, groups=groups
    )
    offsets = np.concatenate([[0], np.cumsum(groups)[:-1]])
    steps = tree["count"].astype(np.float64)
    wide, roots, costs = collapse_sah(tree, 8, steps, leaf_pairs)
    order = tree["order"]
    blases = []
    va = 1 << 20
    for k, mesh in enumerate(meshes):
        pairs = all_pairs[k]

        def make_leaf(node, pairs=pairs, base=offsets[k]):
            ids = order[tree["start"][node] : tree["start"][node] + tree["count"][node]] - base
            leaf = B.Leaf(_leaf_tris(pairs, ids), tree["lo"][node], tree["hi"][node])
            leaf.pair_ids = ids
            return leaf

        bvh = B.Bvh(_wide_objects(tree, wide, roots[k], make_leaf), 8, mesh=mesh)
        for box in bvh.boxes:
            B._choose_obb(box, None)
        _encode_leaves_direct(bvh)
        B._layout(bvh, 128, lambda c: 128 * len(getattr(c, "nodes", None) or [None]))
        bvh.sah_cost = costs[k]
        bvh.pairs = pairs
        blases.append(bvh)
    _encode_boxes8_many(blases)
    for bvh in blases:
        bvh.encoding = "bvh8"
    # the TLAS
    tlas_inst = [(blases[index[id(mesh)]], m) for mesh, m in instances]
    blas_va = {}
    for bvh in blases:
        blas_va[id(bvh)] = va
        va += -(-bvh.size // (1 << 16)) * (1 << 16)
    lo, hi = [], []
    for mesh, m in instances:
        m = B._affine(m)
        v = mesh.vertices.astype(np.float64) @ m[:, :3].T + m[:, 3]
        lo.append(v.min(axis=0))
        hi.append(v.max(axis=0))
    ttree = build_binary_arrays(np.array(lo), np.array(hi), bins=bins)
    twide, troots, tcosts = collapse_sah(ttree, 8, ttree["count"].astype(np.float64), 1)
    torder = ttree["order"]

    def make_inst(node):
        k = int(torder[ttree["start"][node]])
        return B.InstanceLeaf(k, ttree["lo"][node], ttree["hi"][node])

    tlas = B.Bvh(_wide_objects(ttree, twide, troots[0], make_inst), 8, instances=tlas_inst)
    tlas.blas_va = blas_va
    for box in tlas.boxes:
        B._choose_obb(box, None)
    w2o, cb, ud, rlo, rhi = [], [], [], [], []
    for leaf in tlas.leaves:
        blas, m = tlas_inst[leaf.index]
        full = np.vstack([B._affine(m), [0, 0, 0, 1]])
        w2o.append(np.linalg.inv(full)[:3].astype(np.float32))
        cb.append(blas_va[id(blas)] >> 3)
        ud.append(leaf.index & 0xFFFFFF)
        rlo.append(blas.root.lo)
        rhi.append(blas.root.hi)
    rows = encode_instance_rows(
        np.array(w2o), np.array(cb, np.uint64), np.array(ud), np.array(rlo), np.array(rhi)
    )
    for leaf, row in zip(tlas.leaves, rows):
        leaf.dwords = row.tolist()
    B._layout(tlas, 128, lambda c: 128)
    _encode_boxes8(tlas)
    tlas.encoding = "bvh8"
    tlas.sah_cost = tcosts[0]
    return tlas


def _encode_boxes8_many(bvhs):
    for bvh in bvhs:
        _encode_boxes8(bvh)
