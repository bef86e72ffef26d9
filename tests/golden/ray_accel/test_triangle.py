"""Watertight triangle test and triangle-pair result (golden/ray_accel/scalar/triangle.py).

Independent references: a float64 Moeller-Trumbore test (away from edges), exact rays through the
shared edges and vertices of closed meshes (watertightness), and hand-derived result dwords for
the culling / sign-bit rules of gpurt ``IntersectTriangle3_1``.
"""

import struct

import numpy as np
import pytest

from gpurtl.facts.ray_accel import (
    PF_CULL_BACK,
    PF_CULL_FRONT,
    PF_CULL_NON_OPAQUE,
    PF_CULL_OPAQUE,
    PF_DISABLE_TRI_CULL,
    PF_FLIP_FACEDNESS,
    PF_FORCE_NON_OPAQUE,
    PF_FORCE_OPAQUE,
    PF_SKIP_PROCEDURAL,
    PF_SKIP_TRIANGLES,
)
from gpurtl.golden.ray_accel.encode import meshes
from gpurtl.golden.ray_accel.encode import primitive_node as pn
from gpurtl.golden.ray_accel.encode.ray import default_desc, make_ray
from gpurtl.golden.ray_accel.scalar import triangle as tr


def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.uint32)


def run(origins, dirs, a, b, c):
    """Golden test of N rays against N triangles (float32 arrays)."""
    setup = tr.ray_setup(bits(dirs))
    return tr.intersect(bits(origins), setup, bits(a), bits(b), bits(c))


# ---------------------------------------------------------------------------------------------
# against float64 away from edges


def mt64(o, d, a, b, c):
    e1, e2 = b - a, c - a
    p = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, p)
    s = o - a
    with np.errstate(all="ignore"):
        u = np.einsum("ij,ij->i", s, p) / det
        q = np.cross(s, e1)
        v = np.einsum("ij,ij->i", d, q) / det
        t = np.einsum("ij,ij->i", e2, q) / det
    return t, u, v, det


def test_matches_float64_away_from_edges():
    rng = np.random.default_rng(1)
    n = 4000
    a, b, c = (rng.uniform(-2, 2, (n, 3)).astype(np.float32) for _ in range(3))
    o = rng.uniform(-6, 6, (n, 3)).astype(np.float32)
    target = (a.astype(np.float64) + b + c) / 3 + rng.normal(0, 0.8, (n, 3))
    d = (target - o).astype(np.float32)
    res = run(o, d, a, b, c)
    t64, u64, v64, det64 = mt64(*(x.astype(np.float64) for x in (o, d, a, b, c)))
    w64 = 1 - u64 - v64
    clear = (np.minimum(np.minimum(u64, v64), w64) > 1e-3) | (
        np.minimum(np.minimum(u64, v64), w64) < -1e-3
    )
    clear &= np.abs(det64) > 1e-3
    want = (u64 >= 0) & (v64 >= 0) & (w64 >= 0) & (t64 >= 0)
    assert clear.sum() > 3000
    assert np.array_equal(res["hit"][clear], want[clear])
    hits = clear & want
    assert hits.sum() > 300
    t = res["t"].view(np.float32).astype(np.float64)
    i = res["i"].view(np.float32).astype(np.float64)
    j = res["j"].view(np.float32).astype(np.float64)
    assert np.allclose(t[hits], t64[hits], rtol=1e-4, atol=1e-5)
    assert np.allclose(i[hits], u64[hits], atol=1e-4)  # I = weight of v1
    assert np.allclose(j[hits], v64[hits], atol=1e-4)  # J = weight of v2
    # det > 0 <=> front facing <=> the ray runs against the CCW normal (d . n < 0)
    front = np.einsum("ij,ij->i", np.cross(b - a, c - a).astype(np.float64), d) < 0
    assert np.array_equal(~res["backface"][hits], front[hits])


# ---------------------------------------------------------------------------------------------
# watertightness


def hits_per_ray(origins, dirs, cands, v, f, *, strict=False):
    ray_idx = np.array([r for r, fs in enumerate(cands) for _ in fs])
    face_idx = np.array([x for fs in cands for x in fs])
    tri = v[f[face_idx]]
    res = run(origins[ray_idx], dirs[ray_idx], tri[:, 0], tri[:, 1], tri[:, 2])
    hit = res["hit"]
    if strict:  # a deliberately non-watertight variant: zeros count as outside
        e = [x.view(np.float32) for x in (res["u"], res["v"], res["w"])]
        hit = hit & (
            ((e[0] > 0) & (e[1] > 0) & (e[2] > 0)) | ((e[0] < 0) & (e[1] < 0) & (e[2] < 0))
        )
    return np.bincount(ray_idx, weights=hit.astype(np.int64), minlength=len(cands))


MESHES = {
    "icosphere": lambda rng: meshes.icosphere(2, 1.5, (0.1, -0.2, 0.3)),
    "torus": lambda rng: meshes.torus(2.0, 0.7, 20, 10, (0.5, 0.25, -1.0)),
    "fan": lambda rng: meshes.random_fan(rng, spokes=9),
    "dyadic": lambda rng: meshes.dyadic_box(4, 8, rng=rng, jitter=1),
}


@pytest.mark.parametrize("name", sorted(MESHES))
def test_rays_at_shared_edges_and_vertices_never_fall_through(name):
    rng = np.random.default_rng(sorted(MESHES).index(name) + 100)
    v, f = MESHES[name](rng)
    origins, dirs, cands = meshes.edge_vertex_rays(rng, v, f)
    assert len(cands) > 20
    counts = hits_per_ray(origins, dirs, cands, v, f)
    assert counts.min() >= 1, f"{(counts == 0).sum()} of {len(cands)} rays fell through"


def test_exact_edge_and_vertex_rays_dyadic_mesh():
    """Rays exactly through shared edges/vertices (exact FP32 coordinates): the watertight rule
    hits at least one neighbour; a strict rule (zeros outside) lets rays through, which proves
    the rays really are exactly on the edges."""
    rng = np.random.default_rng(5)
    v, f = meshes.dyadic_box(4, 8, rng=rng, jitter=1)
    origins, dirs, cands = meshes.edge_vertex_rays(rng, v, f, exact=True)
    assert len(cands) > 200
    counts = hits_per_ray(origins, dirs, cands, v, f)
    assert counts.min() >= 1
    assert (counts >= 2).sum() > len(cands) // 4  # many rays hit both neighbours
    strict = hits_per_ray(origins, dirs, cands, v, f, strict=True)
    assert (strict == 0).sum() > 0


def test_exact_rays_through_pair_nodes():
    """Watertightness through real compressed nodes: a dyadic mesh packed into primitive nodes,
    exact edge/vertex rays, hits counted from triangle_pair_result dwords."""
    rng = np.random.default_rng(9)
    v, f = meshes.dyadic_box(2, 8, rng=rng, jitter=1)
    tris = [
        pn.Triangle(tuple(tuple(float(c) for c in v[k]) for k in face), prim_id=n, geo_id=1)
        for n, face in enumerate(f)
    ]
    where = [(node, pair, tri) for node, slots in pn.pack_triangles(tris) for pair, tri in slots]
    assert len(where) == len(tris)
    origins, dirs, cands = meshes.edge_vertex_rays(rng, v, f, per_edge=1, exact=True)
    desc = default_desc()
    items, owner = [], []
    for r, (o, d, fs) in enumerate(zip(origins, dirs, cands)):
        ray = make_ray([float(x) for x in o], [float(x) for x in d])
        for face in fs:
            node, pair, tri = where[face]
            items.append((node, (pair & 3) | ((pair & 4) << 1), ray, 0, desc))
            owner.append((r, tri))
    hits = np.zeros(len(cands), dtype=int)
    for ev, (r, tri) in zip(tr.triangle_pair_eval_batch(items), owner):
        hits[r] += ev["dwords"][4 * tri] != tr.POS_INF
    assert len(cands) > 60 and hits.min() >= 1


# ---------------------------------------------------------------------------------------------
# result encoding (gpurt ``rtip3_opcode_emulation.hlsl`` ``IntersectTriangle3_1``)

T0 = pn.Triangle(((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)), prim_id=5, geo_id=3)
T1 = pn.Triangle(((1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (0.0, 1.0, 0.0)), prim_id=6, geo_id=4, opaque=0)
NODE = pn.encode_primitive_node(
    [pn.TrianglePair(T0, T1, range_stop=0), pn.TrianglePair(T1, None, range_stop=0)]
)
DOWN = make_ray((0.25, 0.25, 5.0), (0.0, 0.0, -1.0))  # front face of T0 (normal +z), t = 5
UP = make_ray((0.75, 0.75, -2.0), (0.0, 0.0, 1.0))  # back face of T1, t = 2
INF, ONE = 0x7F800000, 0x3F800000


def result(ray, flags=0, ptr=0, node=NODE, **desc):
    return tr.triangle_pair_result(node, ptr, ray, flags, default_desc(**desc))


def test_front_hit_and_miss_dwords():
    dw = result(DOWN)
    assert dw[0:4] == [f32(5.0), f32(0.25), f32(0.25), (5 << 1) | 0]
    # T1 is missed by DOWN: t = +inf, I = J = 0, J carries the non-opaque sign
    assert dw[4:8] == [INF, 0, 0x80000000, (6 << 1)]
    # DW8/9: (geo << 2) | nav; pair 0 of 2 without range stop -> END_OF_PAIR (0)
    assert dw[8:10] == [3 << 2, 4 << 2]


def test_back_hit_barycentrics_and_backface_bit():
    dw = result(UP)
    # hit (0.75, 0.75) on T1 = (1,0,0) + I (0,1,0) + J (-1,1,0): J = 0.25, I = 0.5
    assert dw[4:8] == [f32(2.0), f32(0.5), f32(0.25) | 0x80000000, (6 << 1) | 1]


@pytest.mark.parametrize(
    "flags,culled,backface",
    [
        (PF_CULL_FRONT, True, 0),
        (PF_CULL_BACK, False, 0),
        (PF_CULL_FRONT | PF_DISABLE_TRI_CULL, False, 0),
        (PF_FLIP_FACEDNESS, False, 1),
        (PF_FLIP_FACEDNESS | PF_CULL_BACK, True, 0),
        (PF_FLIP_FACEDNESS | PF_CULL_FRONT, False, 1),
        (PF_SKIP_TRIANGLES, True, 0),
        (PF_SKIP_PROCEDURAL, False, 0),
        (PF_CULL_OPAQUE, True, 0),
        (PF_CULL_NON_OPAQUE, False, 0),
        (PF_FORCE_NON_OPAQUE | PF_CULL_OPAQUE, False, 0),
        (PF_FORCE_NON_OPAQUE | PF_CULL_NON_OPAQUE, True, 0),
    ],
)
def test_culling_flags_on_front_hit(flags, culled, backface):
    dw = result(DOWN, flags)
    non_opaque = bool(flags & PF_FORCE_NON_OPAQUE)
    sign = 0x80000000 if non_opaque else 0
    if culled:
        assert dw[0:4] == [INF, 0, sign, 5 << 1]
    else:
        assert dw[0:4] == [f32(5.0), f32(0.25), f32(0.25) | sign, (5 << 1) | backface]


def test_pointer_flags_ignored_unless_enabled():
    assert result(DOWN, PF_SKIP_TRIANGLES, pointer_flags_en=0) == result(DOWN)


def test_force_opaque_clears_non_opaque_sign():
    assert result(UP, PF_FORCE_OPAQUE)[6] == f32(0.25)
    assert result(UP)[6] == f32(0.25) | 0x80000000


def test_invalid_tri1_and_pair_pointer_bits():
    # pointer type 1 -> pair 1 (T1 alone, tri1 invalid, last pair of the node -> END_OF_NODE)
    dw = result(UP, ptr=1)
    assert dw[0:4] == [f32(2.0), f32(0.5), f32(0.25) | 0x80000000, (6 << 1) | 1]
    assert dw[4:8] == [INF, ONE, ONE, 0]
    assert dw[8] & 3 == 1
    ev = tr.triangle_pair_eval(NODE, 8, UP, 0, default_desc())  # pair 4 >= 2 pairs: misuse
    assert ev["error"]
    assert not tr.triangle_pair_eval(NODE, 1, UP, 0, default_desc())["error"]


def test_procedural_pair():
    node = pn.encode_procedural_node((0, 0, 0), (1, 1, 1), prim_id=9, geo_id=2, opaque=0)
    dw = result(DOWN, node=node)
    assert dw[0:4] == [0, ONE | 0x80000000, ONE | 0x80000000, 9 << 1]
    assert dw[4:8] == [INF, ONE, ONE, 0]
    assert dw[8] == (2 << 2) | 3
    assert result(DOWN, PF_SKIP_PROCEDURAL, node=node)[0:4] == [INF, 0x80000000, 0x80000000, 9 << 1]
    assert result(DOWN, PF_SKIP_TRIANGLES | PF_CULL_FRONT, node=node)[0] == 0


@pytest.mark.parametrize(
    "o,d",
    [
        ((0.25, 0.25, 5.0), (0.0, 0.0, 0.0)),  # zero direction
        ((0.25, 0.25, 5.0), (0.0, 0.0, float("nan"))),
        ((float("nan"), 0.25, 5.0), (0.0, 0.0, -1.0)),
        ((0.25, 0.25, float("inf")), (0.0, 0.0, -1.0)),
        ((0.25, 0.25, 5.0), (float("inf"), 0.0, -1.0)),
        ((0.25, 0.25, -5.0), (0.0, 0.0, -1.0)),  # triangle behind the origin
    ],
)
def test_ieee_corner_cases_miss(o, d):
    dw = result(make_ray(o, d))
    assert dw[0] == INF and dw[4] == INF


def test_zero_direction_components_still_hit():
    dw = result(make_ray((0.25, 0.25, 5.0), (-0.0, 0.0, -2.0)))
    assert dw[0] == f32(2.5)


def test_legacy_result_modes():
    node = pn.encode_legacy_node(
        [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 1.0, 0.0)],
        prim_index=(1, 2),
        geometry_index=7,
    )
    r1 = tr.legacy_triangle_result(node, 0, DOWN, 0, default_desc(return_mode=1))
    tnum, tden = (struct.unpack("<f", struct.pack("<I", x))[0] for x in r1[:2])
    assert tden > 0 and tnum / tden == 5.0
    i, j = (struct.unpack("<f", struct.pack("<I", x))[0] / tden for x in r1[2:4])
    assert (i, j) == (0.25, 0.25)
    r0 = tr.legacy_triangle_result(node, 0, DOWN, 0, default_desc(return_mode=0))
    assert r0[:2] == r1[:2] and r0[2] == 0x8989 and r0[3] == 1
    flipped = tr.legacy_triangle_result(node, 0, DOWN, PF_FLIP_FACEDNESS, default_desc())
    assert flipped[:2] == [r1[0] ^ 0x80000000, r1[1] ^ 0x80000000]
    assert tr.legacy_triangle_result(node, 0, DOWN, PF_CULL_FRONT, default_desc()) == [
        INF,
        ONE,
        0,
        0,
    ]
    # type 1 = (v1, v3, v2): DOWN at (0.25, 0.25) misses it
    assert tr.legacy_triangle_result(node, 1, DOWN, 0, default_desc()) == [INF, ONE, 0, 0]


@pytest.mark.parametrize(
    "scale,hits",
    [
        (1e-18, True),
        (1e-9, True),
        (1.0, True),
        (1e9, True),
        (1e17, True),
        (1e20, False),
        (1e-30, False),
    ],
)
def test_dynamic_range(scale, hits):
    """FP32 range of the edge functions (module doc string): hits with an accurate t inside the
    range, a clean miss (t = +inf) outside it."""
    tri = pn.Triangle(((0.0, 0.0, 0.0), (scale, 0.0, 0.0), (0.0, scale, 0.0)))
    node = pn.encode_primitive_node([pn.TrianglePair(tri)])
    dw = result(make_ray((0.25 * scale, 0.25 * scale, 5.0), (0.0, 0.0, -1.0)), node=node)
    t = struct.unpack("<f", struct.pack("<I", dw[0]))[0]
    if hits:
        assert abs(t - 5.0) < 1e-5
    else:
        assert dw[0] == INF
