"""The golden barycentric -> micro-triangle index against an independent recursive subdivision.

The reference here never uses the bit-parallel conversion: it subdivides the base triangle with the
Vulkan specification's child rule (``chapters/raytraversal.adoc``: children 0 (P0, m01, m20), 1
(m20, m12, m01), 2 (m01, P1, m12), 3 (m12, m20, P2)) and locates points by exact integer
point-in-triangle tests. Points on edges and vertices are settled by the Vulkan reference
algorithm's tie rules restated geometrically: a point takes the micro-triangle that contains it
moved by an infinitesimal step along (+1, +1) (floor quantization, anti-diagonals to the inverted
triangle); on the outer edge u + v = 1 the step is (-2, +1) (outer row stays upright, corners
clamp), and (+1, -2) at v = 1; points beyond the outer edge first move to it along u (the reference
algorithm's "lower iu" clamp).
"""

from fractions import Fraction

import numpy as np
import pytest

from gpurtl.facts.fp32 import bits_f32, f32_bits
from gpurtl.golden.stoc.index import MAX_LEVEL, bary_to_index, f32_to_fixed, index_fixed

F = 24


def subdivide(level):
    """(indices, corners) of every micro-triangle at ``level``: corners in units of 2**-level,
    shape (4**level, 3, 2), in curve order (index = position)."""
    n = 1 << level
    tris = np.array([[[0, 0], [n, 0], [0, n]]], dtype=np.int64)
    for _ in range(level):
        p0, p1, p2 = tris[:, 0], tris[:, 1], tris[:, 2]
        m01, m12, m20 = (p0 + p1) // 2, (p1 + p2) // 2, (p2 + p0) // 2
        children = np.stack(
            [
                np.stack([p0, m01, m20], 1),
                np.stack([m20, m12, m01], 1),
                np.stack([m01, p1, m12], 1),
                np.stack([m12, m20, p2], 1),
            ],
            1,
        )
        tris = children.reshape(-1, 3, 2)
    return tris


def _side(a, b, p):
    return (b[..., 0] - a[..., 0]) * (p[..., 1] - a[..., 1]) - (b[..., 1] - a[..., 1]) * (
        p[..., 0] - a[..., 0]
    )


def locate(qu, qv, scale, level):
    """Recursive descent: index of the micro-triangle strictly containing points (qu, qv) given
    in units of 1/scale (scale = 2**level * 2**k); every point must be off every grid line."""
    q = np.stack([np.asarray(qu, np.int64), np.asarray(qv, np.int64)], -1)
    count = len(q)
    corners = np.broadcast_to(
        np.array([[0, 0], [scale, 0], [0, scale]], np.int64), (count, 3, 2)
    ).copy()
    index = np.zeros(count, np.int64)
    for _ in range(level):
        p0, p1, p2 = corners[:, 0], corners[:, 1], corners[:, 2]
        m01, m12, m20 = (p0 + p1) // 2, (p1 + p2) // 2, (p2 + p0) // 2
        kids = np.stack(
            [
                np.stack([p0, m01, m20], 1),
                np.stack([m20, m12, m01], 1),
                np.stack([m01, p1, m12], 1),
                np.stack([m12, m20, p2], 1),
            ],
            1,
        )
        a, b, c = kids[:, :, 0], kids[:, :, 1], kids[:, :, 2]
        qq = q[:, None, :]
        s0, s1, s2 = _side(a, b, qq), _side(b, c, qq), _side(c, a, qq)
        inside = ((s0 > 0) & (s1 > 0) & (s2 > 0)) | ((s0 < 0) & (s1 < 0) & (s2 < 0))
        assert (inside.sum(1) == 1).all(), "a point lies on a grid line or outside"
        child = inside.argmax(1)
        index = index * 4 + child
        corners = kids[np.arange(count), child]
    return index


def reference_index(U, V, level):
    """Independent index of fixed-point points (U, V), 1.0 = 2**F, tie rules as the module doc."""
    U, V = np.asarray(U, np.int64).copy(), np.asarray(V, np.int64).copy()
    one = 1 << F
    beyond = U + V > one
    U[beyond] = one - V[beyond]
    outer = U + V == one
    du = np.where(outer, np.where(V == one, 1, -2), 1)
    dv = np.where(outer, np.where(V == one, -2, 1), 1)
    return locate(4 * U + du, 4 * V + dv, 4 * one, level)


@pytest.mark.parametrize("level", range(0, 9))
def test_centroids_map_to_their_own_index(level):
    tris = subdivide(level)
    n = 1 << level
    # FP32 of the exact centroid (round to nearest); centroids are >= 1/(3n) from every edge
    cu = (
        np.array([f32_bits(float(Fraction(int(s), 3 * n))) for s in tris[:, :, 0].sum(1)])
        if level < 5
        else (tris[:, :, 0].sum(1) / (3.0 * n)).astype(np.float32).view(np.uint32)
    )
    cv = (
        np.array([f32_bits(float(Fraction(int(s), 3 * n))) for s in tris[:, :, 1].sum(1)])
        if level < 5
        else (tris[:, :, 1].sum(1) / (3.0 * n)).astype(np.float32).view(np.uint32)
    )
    got = bary_to_index(np.asarray(cu, np.uint32), np.asarray(cv, np.uint32), level)
    assert np.array_equal(got, np.arange(4**level))


def test_subdivision_matches_the_spec_level_tables():
    # levels 1 and 2 of the Vulkan curve in coordinates x2 and x4: an independent check of
    # subdivide()
    level2 = [
        [(0, 0), (1, 0), (0, 1)],
        [(0, 1), (1, 1), (1, 0)],
        [(1, 0), (2, 0), (1, 1)],
        [(1, 1), (0, 1), (0, 2)],
        [(0, 2), (1, 2), (1, 1)],
        [(1, 1), (2, 1), (1, 2)],
        [(1, 2), (2, 2), (2, 1)],
        [(2, 1), (1, 1), (2, 0)],
        [(2, 0), (3, 0), (2, 1)],
        [(2, 1), (3, 1), (3, 0)],
        [(3, 0), (4, 0), (3, 1)],
        [(3, 1), (2, 1), (2, 2)],
        [(2, 2), (1, 2), (1, 3)],
        [(1, 3), (0, 3), (1, 2)],
        [(1, 2), (0, 2), (0, 3)],
        [(0, 3), (1, 3), (0, 4)],
    ]
    assert subdivide(2).tolist() == [[list(p) for p in t] for t in level2]
    assert subdivide(1).tolist() == [
        [[0, 0], [1, 0], [0, 1]],
        [[0, 1], [1, 1], [1, 0]],
        [[1, 0], [2, 0], [1, 1]],
        [[1, 1], [0, 1], [0, 2]],
    ]


def _edge_points(level, rng, count):
    """Fixed-point points on the level's grid: every vertex, points on every grid line family,
    on the outer edge, on the base edges, beyond the outer edge, plus random points."""
    one = 1 << F
    n = 1 << level
    step = one // n
    if level <= 8:  # every vertex of the grid
        g = np.arange(n + 1) * step
        gu, gv = np.meshgrid(g, g, indexing="ij")
        keep = gu + gv <= one
        pts = [(gu[keep], gv[keep])]
    else:  # a random sample of them
        gu = rng.integers(0, n + 1, count)
        gv = np.minimum(rng.integers(0, n + 1, count), n - gu)
        pts = [(gu * step, gv * step)]
    t = rng.integers(0, one + 1, count)
    k = rng.integers(0, n + 1, count) * step
    pts.append((k, np.minimum(t, one - k)))  # u on a grid line
    pts.append((np.minimum(t, one - k), k))  # v on a grid line
    a = rng.integers(0, one + 1, count)  # u + v = k (anti-diagonals)
    pts.append((np.minimum(a, k), k - np.minimum(a, k)))
    pts.append((a, one - a))  # outer edge
    pts.append((rng.integers(0, one + 1, count), rng.integers(0, one + 1, count)))  # beyond too
    pts.append((np.zeros(count, np.int64), a))
    pts.append((a, np.zeros(count, np.int64)))
    # points one fixed-point step off the lines
    pts.append((np.clip(k + rng.integers(-1, 2, count), 0, one), np.minimum(t, one - k)))
    return (
        np.concatenate([p[0] for p in pts]).astype(np.int64),
        np.concatenate([p[1] for p in pts]).astype(np.int64),
    )


@pytest.mark.parametrize("level", range(0, 9))
def test_edges_and_vertices_follow_the_tie_rules(level):
    rng = np.random.default_rng(level)
    U, V = _edge_points(level, rng, 3000)
    assert np.array_equal(index_fixed(U, V, level), reference_index(U, V, level))


def test_deep_levels_on_random_and_grid_points():
    rng = np.random.default_rng(99)
    for level in (10, 12):
        U, V = _edge_points(level, rng, 2000)
        sel = rng.choice(len(U), 6000, replace=False)
        U, V = U[sel], V[sel]
        assert np.array_equal(index_fixed(U, V, level), reference_index(U, V, level))


def test_coarse_index_is_fine_index_shifted():
    rng = np.random.default_rng(5)
    U, V = _edge_points(12, rng, 3000)
    fine = index_fixed(U, V, MAX_LEVEL)
    for level in range(MAX_LEVEL + 1):
        assert np.array_equal(index_fixed(U, V, level), fine >> (2 * (MAX_LEVEL - level)))


def test_fixed_point_conversion_against_fractions():
    rng = np.random.default_rng(1)
    bits = np.concatenate(
        [
            rng.integers(0, 1 << 32, 20000, dtype=np.uint64),
            rng.integers(0x30000000, 0x3F800002, 20000, dtype=np.uint64),  # mostly in [0, 1]
            np.array(
                [
                    0,
                    0x80000000,
                    0x3F800000,
                    0x3F7FFFFF,
                    0x7F800000,
                    0xFF800000,
                    0x7FC00000,
                    0xFFC00000,
                    0x7F800001,
                    0x00000001,
                    0x00800000,
                    0x33800000,
                    0x33FFFFFF,
                    0x34000000,
                    0x3F000000,
                    0xBF000000,
                    0x4B800000,
                ],
                dtype=np.uint64,
            ),
        ]
    )
    for frac_bits in (12, 16, 24):
        got = f32_to_fixed(bits, frac_bits)
        for b, g in zip(bits.tolist(), got.tolist()):
            x = bits_f32(b)
            if x != x or x <= 0:
                want = 0
            elif x >= 1:
                want = 1 << frac_bits
            else:
                want = int(Fraction(x) * (1 << frac_bits))  # truncation toward zero
            assert g == want, (hex(b), frac_bits)


def test_floor_is_exact_on_fp32_grid_points():
    # u = k / 2**L exactly: the cell must be k (floor), at every level
    for level in range(1, MAX_LEVEL + 1):
        n = 1 << level
        for k in (1, n // 2, n - 1):
            u = f32_bits(k / n)
            below = u - 1
            assert bary_to_index(u, 0, level) == index_fixed(k << (F - level), 0, level)
            assert index_fixed(f32_to_fixed(below), 0, level) != index_fixed(
                f32_to_fixed(u), 0, level
            )


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="`level` must be an integer from 0 to 12, not 13"):
        index_fixed(0, 0, 13)
    with pytest.raises(ValueError, match="`frac_bits` must be"):
        f32_to_fixed(0, 30)
