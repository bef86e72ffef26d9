"""The closest-hit traversal example of docs/session.md (``examples/closest_hit.py``): one wave of
rays through ``ray_accel`` and ``ds_bvh_stack`` sessions, every decision taken from the RTL's
outputs, finds the same closest hits as the golden traversal
(:func:`gpurtl.golden.bvh.traversal.traverse`, bit-exact box nodes) and as a float64 ray-triangle
test of every triangle."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gpurtl.golden.bvh.traversal import traverse

ROOT = Path(__file__).resolve().parents[2]


def example():
    spec = importlib.util.spec_from_file_location("closest_hit", ROOT / "examples/closest_hit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def brute_force(mesh, origins, directions):
    """Closest hit of every ray against every triangle (Moller-Trumbore in float64): distances
    (inf: a miss), triangle indices (-1) and the gap to the second closest triangle."""
    tris = mesh.triangles.astype(np.float64)
    v0, e1, e2 = tris[:, 0], tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    t_best, prim, gap = [], [], []
    for o, d in zip(origins.astype(np.float64), directions.astype(np.float64)):
        p = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / det
            s = o - v0
            u = np.einsum("ij,ij->i", s, p) * inv
            q = np.cross(s, e1)
            v = (q @ d) * inv
            t = np.einsum("ij,ij->i", e2, q) * inv
        hit = (np.abs(det) > 1e-12) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
        t = np.where(hit, t, np.inf)
        order = np.argsort(t)
        t_best.append(t[order[0]])
        prim.append(int(order[0]) if np.isfinite(t[order[0]]) else -1)
        gap.append(t[order[1]] - t[order[0]] if np.isfinite(t[order[0]]) else np.inf)
    return np.array(t_best), np.array(prim), np.array(gap)


def assert_golden_hits(bvh, origins, directions, t, prim):
    """The example's hits are the golden traversal's: the same rays hit, at the same distance
    (the RTL's triangle test is FP32, the golden leaf test float64), on the same triangle where
    the second closest is not within rounding."""
    golden = traverse(bvh, origins, directions, model="exact")
    _, _, gap = brute_force(bvh.mesh, origins, directions)
    assert np.array_equal(np.isfinite(t), np.isfinite(golden.t))
    hit = np.isfinite(golden.t)
    assert np.allclose(t[hit], golden.t[hit], rtol=1e-5)
    unique = hit & (gap > 1e-4)
    assert np.array_equal(prim[unique], golden.prim[unique])


@pytest.mark.verilator
def test_closest_hits_of_a_wave_on_the_fast_backend():
    closest_hit = example()
    bvh = closest_hit.scene()
    origins, directions = closest_hit.rays(bvh, 32)
    t, prim, iterations = closest_hit.closest_hits(bvh, origins, directions, backend="fast")
    want_t, want_prim, gap = brute_force(bvh.mesh, origins, directions)
    assert np.isfinite(t).sum() >= 20 and (~np.isfinite(t)).sum() >= 4  # hits and misses
    assert np.array_equal(np.isfinite(t), np.isfinite(want_t))
    hit = np.isfinite(want_t)
    assert np.allclose(t[hit], want_t[hit], rtol=1e-5)
    unique = hit & (gap > 1e-4)
    assert np.array_equal(prim[unique], want_prim[unique])
    assert iterations >= 3
    assert_golden_hits(bvh, origins, directions, t, prim)


@pytest.mark.slow  # about two minutes: pysim builds and runs the triangle paths slowly
def test_closest_hits_on_pysim():
    """The same loop on Amaranth's simulator, for two rays into one box (its 12 triangles in
    three leaves) with one register per FP32 core (``fp=shallow``): the pysim model of the
    triangle paths runs at tens of cycles per second, so only a few hundred cycles fit here."""
    closest_hit = example()
    bvh = closest_hit.scene(boxes=1)
    centre = bvh.mesh.vertices.mean(axis=0)
    origins = np.array([[0.0, 0.0, -8.0], [0.3, -0.2, -8.0]], np.float32)
    directions = (centre - origins).astype(np.float32)
    t, prim, iterations = closest_hit.closest_hits(
        bvh,
        origins,
        directions,
        backend="pysim",
        ray_accel={**closest_hit.RAY_ACCEL, "fp": "shallow"},
    )
    want_t, want_prim, _ = brute_force(bvh.mesh, origins, directions)
    assert np.isfinite(want_t).all()
    assert np.allclose(t, want_t, rtol=1e-5)
    assert iterations >= 2
    assert_golden_hits(bvh, origins, directions, t, prim)
