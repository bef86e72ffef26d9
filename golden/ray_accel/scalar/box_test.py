"""The per-child box test (gpurt ``IntersectCommon.hlsl`` ``fast_intersect_bbox``), bit-exact,
vectorised over any array shape.

Source: gpurt ``src/shaders/rtip3_opcode_emulation.hlsl`` ``IntersectNodeBvh8`` and
``src/shaders/IntersectCommon.hlsl`` ``fast_intersect_bbox``. All arithmetic goes through
``golden/fp32`` (IEEE binary32, round to nearest even; ``ftz`` flushes subnormals).

Per axis ``a`` (FP32 sub, then mul)::

    tp_min = (bmin - o) * inv_d ;  tp_max = (bmax - o) * inv_d
    lo = inv_d >= 0 ? tp_min : tp_max ;  hi = inv_d >= 0 ? tp_max : tp_min    (-0 >= 0 holds)
    tmin_raw = maxnum(maxnum(lo_x, lo_y), lo_z) ;  tmax_raw = minnum(minnum(hi_x, hi_y), hi_z)
    min_t = maxnum(tmin_raw, +0) ;  max_t = minnum(tmax_raw, extent)
    nan_interval = isnan(tmin_raw) or isnan(tmax_raw)
    grown = box_grow == 0 ? max_t : fma(max_t, box_grow * 2**-24, max_t)
    hit = not nan_interval and min_t <= grown

Choices where the sources are silent (each documented here and in the RTL):

* ``maxnum``/``minnum`` ignore a NaN operand (return the other one; NaN only when both are NaN),
  as HLSL/D3D ``min``/``max`` do -- the emulation is HLSL. This matters for conservativeness: a
  ray with a zero direction component whose origin lies exactly on a slab plane gets
  ``0 * inf = NaN`` for that plane, and the exact ray *does* touch the box there; ignoring the NaN
  plane keeps the box. A NaN interval (all three planes NaN) is still a miss. Equal operands
  return the first one. (``golden/fp32.fmin/fmax`` propagate NaN, so they are not used here.)
* The grow ``max_t * (1 + g * 2**-24)`` is computed as one FMA, ``fma(max_t, g * 2**-24, max_t)``
  (``g * 2**-24`` is exact in FP32; ``1 + g * 2**-24`` is not for odd ``g``), i.e. the exact
  grown value rounded once. ``g = 0`` skips the FMA (``fma(inf, 0, inf)`` would be NaN).
* The reciprocal is ``golden/fp32.rcp`` (correctly rounded; the hardware's precision is unknown).

Conservativeness (``tests/golden/ray_accel/test_ray_box.py`` checks it against exact rationals): every
computed ``t`` is the exact one times ``(1 + d1)(1 + d2)(1 + d3)`` with ``|di| <= 2**-24`` (rcp,
sub, mul), so for a ray segment that touches the box ``tmin_fp / tmax_fp <= ((1+u)/(1-u))**3``,
``u = 2**-24``, about ``1 + 6u``; the FMA grow adds at most ``u`` of rounding. ``box_grow >= 8``
makes the test provably conservative while no intermediate overflows or becomes subnormal and
every non-zero direction component has ``|d| >= 2**-126`` (so ``rcp`` is finite and normal).
The driver default 6 passes every random and adversarial case of the tests. With ``box_grow = 0``
the test is not conservative (the tests show a counterexample).
"""

import numpy as np

from gpurtl.facts.ray_accel import BOX_GROW_UNIT, box_grow_constant
from gpurtl.golden import fp32

__all__ = [
    "maxnum",
    "minnum",
    "ray_reciprocal",
    "grow_constant",
    "grow_max",
    "box_test",
    "box_engine",
    "GROW_UNIT",
]

GROW_UNIT = BOX_GROW_UNIT
grow_constant = box_grow_constant


def _u32(x):
    return np.asarray(x, dtype=np.int64).astype(np.uint32)


def maxnum(a, b, *, ftz=False):
    """Larger operand ignoring a NaN operand (first operand on ties), as uint32 patterns."""
    a, b = np.broadcast_arrays(_u32(a), _u32(b))
    pick_b = fp32.is_nan(a) | (~fp32.is_nan(b) & np.asarray(fp32.lt(a, b, ftz=ftz)))
    return np.where(pick_b, b, a).astype(np.uint32)


def minnum(a, b, *, ftz=False):
    """Smaller operand ignoring a NaN operand (first operand on ties), as uint32 patterns."""
    a, b = np.broadcast_arrays(_u32(a), _u32(b))
    pick_b = fp32.is_nan(a) | (~fp32.is_nan(b) & np.asarray(fp32.lt(b, a, ftz=ftz)))
    return np.where(pick_b, b, a).astype(np.uint32)


def ray_reciprocal(direction, *, ftz=False):
    """``rcp(dir)`` per component (the instruction has no inverse-direction operand, RDNA4 ISA
    guide, ``IMAGE_BVH8_INTERSECT_RAY``)."""
    return np.asarray(fp32.rcp(_u32(direction), ftz=ftz), dtype=np.uint32)


def grow_max(max_t, box_grow, *, ftz=False):
    """``max_t * (1 + box_grow * 2**-24)`` rounded once (``max_t`` unchanged for 0)."""
    max_t = _u32(max_t)
    g = np.broadcast_to(np.asarray(box_grow, dtype=np.int64), max_t.shape)
    consts = np.array([grow_constant(k) for k in range(256)], dtype=np.uint32)[g & 0xFF]
    grown = np.asarray(fp32.fma(max_t, consts, max_t, ftz=ftz), dtype=np.uint32)
    return np.where(g == 0, max_t, grown).astype(np.uint32)


def box_test(origin, inv_dir, extent, bmin, bmax, box_grow, *, ftz=False):
    """Slab test of boxes against rays; every argument broadcasts.

    ``origin``, ``inv_dir``, ``bmin``, ``bmax``: uint32 arrays whose last axis has length 3;
    ``extent``, ``box_grow``: arrays broadcasting against the leading axes.
    Returns a dict of arrays (leading shape): ``hit`` (bool), ``min_t``, ``max_t`` (clamped, and
    +inf/-inf on a NaN interval), ``tmin_raw``, ``tmax_raw`` (NaN replaced by 0 / +inf, the
    midpoint-key inputs) and ``nan`` (bool).
    """
    o, inv, lo_b, hi_b = np.broadcast_arrays(_u32(origin), _u32(inv_dir), _u32(bmin), _u32(bmax))
    tp_min = np.asarray(fp32.mul(fp32.sub(lo_b, o, ftz=ftz), inv, ftz=ftz), dtype=np.uint32)
    tp_max = np.asarray(fp32.mul(fp32.sub(hi_b, o, ftz=ftz), inv, ftz=ftz), dtype=np.uint32)
    positive = np.asarray(fp32.le(0, inv, ftz=ftz))  # -0 >= 0 holds; NaN is "negative"
    lo = np.where(positive, tp_min, tp_max)
    hi = np.where(positive, tp_max, tp_min)
    tmin_raw = maxnum(maxnum(lo[..., 0], lo[..., 1], ftz=ftz), lo[..., 2], ftz=ftz)
    tmax_raw = minnum(minnum(hi[..., 0], hi[..., 1], ftz=ftz), hi[..., 2], ftz=ftz)
    extent = np.broadcast_to(_u32(extent), tmin_raw.shape)
    min_t = maxnum(tmin_raw, 0, ftz=ftz)
    max_t = minnum(tmax_raw, extent, ftz=ftz)
    nan = fp32.is_nan(tmin_raw) | fp32.is_nan(tmax_raw)
    min_t = np.where(nan, np.uint32(fp32.POS_INF), min_t).astype(np.uint32)
    max_t = np.where(nan, np.uint32(fp32.NEG_INF), max_t).astype(np.uint32)
    grown = grow_max(max_t, np.broadcast_to(np.asarray(box_grow), tmin_raw.shape), ftz=ftz)
    hit = ~nan & np.asarray(fp32.le(min_t, grown, ftz=ftz))
    return {
        "hit": hit,
        "min_t": min_t,
        "max_t": max_t,
        "nan": nan,
        "tmin_raw": np.where(fp32.is_nan(tmin_raw), np.uint32(0), tmin_raw).astype(np.uint32),
        "tmax_raw": np.where(fp32.is_nan(tmax_raw), np.uint32(fp32.POS_INF), tmax_raw).astype(
            np.uint32
        ),
    }


def box_engine(tx, *, ftz=False):
    """Golden reference of one RTL ``BoxEngine`` transaction.

    ``tx``: ``base[3]`` (the node origin), ``boxes[n]`` {``off_min[3]``, ``off_max[3]``} (the
    plane offsets), ``ray`` {``origin[3]``, ``extent``, ``box_grow``, ``heuristic``} and
    ``inv_dir[3]``. Planes are ``base + off`` (an FP32 add that never flushes, as the node
    decoder's :func:`.box_node.dequantize`); then :func:`box_test` and the heuristic's sort key
    (:func:`.sort.sort_key`). Returns ``{"boxes": [{"hit", "key"}] * n}``.
    """
    from .sort import sort_key

    base = np.asarray(tx["base"], dtype=np.uint32)
    n = len(tx["boxes"])
    mins = np.array([fp32.add(base, _u32(b["off_min"])) for b in tx["boxes"]], dtype=np.uint32)
    maxs = np.array([fp32.add(base, _u32(b["off_max"])) for b in tx["boxes"]], dtype=np.uint32)
    ray = tx["ray"]
    r = box_test(
        _u32(ray["origin"])[None, :],
        _u32(tx["inv_dir"])[None, :],
        ray["extent"],
        mins.reshape(n, 3),
        maxs.reshape(n, 3),
        ray["box_grow"],
        ftz=ftz,
    )
    keys = sort_key(ray["heuristic"], r["min_t"], r["max_t"], r["tmin_raw"], r["tmax_raw"], ftz=ftz)
    return {"boxes": [{"hit": int(h), "key": int(k)} for h, k in zip(r["hit"], keys)]}
