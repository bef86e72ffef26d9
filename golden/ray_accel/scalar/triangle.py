"""Watertight ray/triangle test and the RT IP 3.1 triangle-pair result, bit exact in FP32.

**The hardware's own triangle algorithm is not public.** AMD documents only that the intersection
engine returns ``t_num, t_denom, I_num, J_num`` (legacy) or ``t, I, J`` (RT IP 3.1); gpurt's
emulation uses a Moeller-Trumbore-style test that is not watertight (gpurt
``src/shaders/IntersectCommon.hlsl`` ``fast_intersect_triangle``). This project implements the
watertight test of Woop, Benthin and Wald, "Watertight Ray/Triangle Intersection", JCGT 2(1), 2013,
in FP32 only (``gpurtl.golden.fp32``, round to nearest even, subnormals kept, canonical NaN), with
the exact operation order below. The *result encoding* (sign bits, culling, procedural and
invalid-triangle values, navigation bits) follows gpurt's ``IntersectTriangle3_1``,
``PerformTriangleCulling`` and ``CalcNavigationBits``.

Per-ray setup (:func:`ray_setup`, computed once per ray)
--------------------------------------------------------
1. ``kz`` = the axis of largest ``|dir|``, comparing magnitude bit patterns as unsigned integers
   (a NaN magnitude counts as the largest); ties go to the lowest axis (x before y before z).
2. ``kx = (kz + 1) % 3``, ``ky = (kx + 1) % 3``; swap ``kx`` and ``ky`` when ``dir[kz] < 0``
   (IEEE compare: ``-0`` and NaN do not swap), which keeps the winding.
3. ``Sx = dir[kx] / dir[kz]``, ``Sy = dir[ky] / dir[kz]``, ``Sz = 1 / dir[kz]`` (correctly rounded
   divisions).

Per triangle (:func:`intersect`), vertices ``A, B, C`` = node ``v0, v1, v2``
---------------------------------------------------------------------------
1. ``P' = P - origin`` per component (``sub``), for ``P`` in ``A, B, C``.
2. Shear: ``Px = fma(-Sx, P'[kz], P'[kx])``, ``Py = fma(-Sy, P'[kz], P'[ky])`` (one rounding each).
   A vertex maps to the same 2-D point in every triangle that uses it.
3. Edge functions, each a difference of two rounded products (no FMA here):
   ``U = Cx*By - Cy*Bx``, ``V = Ax*Cy - Ay*Cx``, ``W = Bx*Ay - By*Ax``. The edge from P to Q is always
   evaluated as ``Qx*Py - Qy*Px``, so a shared edge seen from the other triangle gives exactly the
   negated value (products commute, and ``a - b = -(b - a)`` in round-to-nearest-even).
4. **Tie rule (replaces Woop's double-precision fallback):** the ray is outside iff some edge
   function is ``< 0`` and another is ``> 0``; zeros count as inside for both windings. Because the
   computed sign of each edge function never contradicts the exact sign of the (already rounded)
   2-D determinant (rounding is monotonic) and is exactly antisymmetric across a shared edge, a ray
   through a shared edge or vertex hits at least one (possibly both) of the adjacent triangles,
   never neither; ``tests/golden/ray_accel/test_triangle.py`` checks this with rays aimed at shared edges
   and vertices.
5. ``det = (U + V) + W``; ``Az = Sz*A'[kz]``, ``Bz = Sz*B'[kz]``, ``Cz = Sz*C'[kz]``;
   ``T = fma(W, Cz, fma(V, Bz, U*Az))``.
6. ``t = T / det``, ``I = V / det`` (weight of v1), ``J = W / det`` (weight of v2).
7. Hit iff inside, ``det`` is neither zero nor NaN, and ``0 <= t < +inf`` (IEEE compares, so a NaN
   ``t`` misses). ``det > 0`` means the ray meets the counter-clockwise side, i.e. front facing in
   gpurt's convention ( ``t_denom >= 0``); ``backface = sign(det)``. There is no ``tmin``
   and the ray extent is not compared (gpurt ``rtip3_opcode_emulation.hlsl``
   ``IntersectTriangle3_1``: the shader does that).

Range: FP32 only, without the paper's double-precision fallback. The edge functions are products
of sheared coordinates relative to the origin, so they overflow (``inf - inf = NaN``, a miss) once
those coordinates exceed about ``sqrt(FLT_MAX) ~ 1.8e19`` and flush towards zero (``det = 0``, a
miss) below about ``1e-22``. Watertightness is guaranteed inside that range; outside it the test
misses consistently (tests/golden/ray_accel/test_triangle.py ``test_dynamic_range``).

Result (:func:`triangle_pair_result`, gpurt ``rtip3_opcode_emulation.hlsl``
``IntersectTriangle3_1``), per triangle ``k`` of the pair (DW ``4k .. 4k+3``)
----------------------------------------------------------------------------------------------------
* effective pointer flags = ``pointer_flags`` if ``desc["pointer_flags_en"]`` else 0.
* ``opaque = FORCE_OPAQUE or (not FORCE_NON_OPAQUE and descriptor opaque bit)``.
* Procedural triangle (indices v0 = v1 = 15): culled by ``SKIP_PROCEDURAL``, by ``CULL_OPAQUE`` when
  opaque, by ``CULL_NON_OPAQUE`` when not; not culled gives ``t = 0, I = J = 1.0``.
* Triangle: culled by ``SKIP_TRIANGLES``, by the opaque/non-opaque culls, and (unless
  ``DISABLE_TRI_CULL``) by ``CULL_FRONT``/``CULL_BACK`` on the facing after ``FLIP_FACEDNESS`` (which
  flips the facing and leaves ``t`` unchanged, as XOR-ing both signs of ``t_num``/``t_denom`` does).
* Geometric miss or culled: ``t = +inf, I = J = 0, backface = 0`` (the sources leave the miss I/J
  undefined; this model picks 0, the culled values).
* DW0 ``t``; DW1 ``|I|`` with sign bit = procedural; DW2 ``|J|`` with sign bit = not opaque;
  DW3 ``(prim_id << 1) | backface`` (32 bits).
* Invalid triangle 1 (indices 0, 0, 0): DW4..7 = ``+inf, 1.0, 1.0, 0`` (no sign bits).
* DW8 / DW9 = ``(geo_id << 2) | navigation`` for triangle 0 / 1 (32 bits).
* The per-triangle double-sided descriptor bits are not used (gpurt's emulation never reads them,
  gpurt ``rtip3_opcode_emulation.hlsl`` ``IntersectTriangle3_1`` "[gap]").

Misuse (reported by :func:`triangle_pair_eval` as ``error``, outputs still computed as above): a
pointer whose low 3 bits are not a triangle type (``(ptr & 7) > 3``), a pair index at or above the
node's pair count, or a malformed header (see :mod:`.primitive_node`).

Legacy node (:func:`legacy_triangle_result`, dual instruction, gpurt
``gfx10/TriangleNode1_0.hlsli``, ``IntersectTriangle3_1``): returns
``{t_num, t_denom, I_num, J_num}`` (``desc["return_mode"] = 1``) or ``{t_num, t_denom,
triangle_id, hit_status}`` (mode 0) with ``t_num = T``, ``t_denom = det`` and the barycentric
numerators ``(U, V, W)`` picked by I_SRC / J_SRC (source 3 gives +0). ``FLIP_FACEDNESS`` XORs the
signs of ``t_num`` and ``t_denom``. Miss or culled: ``{+inf, 1.0, 0, 0}``. ``hit_status`` is 1 for a
hit that is not culled (the sources name the field but not its values). Opaque is triangle-id bit 7;
the flip-winding, double-sided and procedural bits are not used (as in gpurt's emulation).
"""

import numpy as np

from gpurtl.facts.fp32 import MAGNITUDE_MASK, ONE, POS_INF, SIGN_BIT
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
from gpurtl.golden import fp32

from ..encode import primitive_node as pn
from ..encode.ray import pair_index

__all__ = [
    "ONE",
    "POS_INF",
    "SIGN",
    "ray_setup",
    "intersect",
    "triangle_result_dwords",
    "triangle_pair_eval",
    "triangle_pair_eval_batch",
    "triangle_pair_result",
    "legacy_triangle_result",
    "legacy_triangle_result_batch",
    "effective_flags",
]

SIGN = SIGN_BIT
_MAG = MAGNITUDE_MASK
_M32 = 0xFFFFFFFF


def _u32(x):
    return np.asarray(x, dtype=np.int64).astype(np.uint32)


def ray_setup(direction):
    """Per-ray constants of the watertight test.

    ``direction``: uint32 array ``(..., 3)``. Returns ``(kx, ky, kz, sx, sy, sz)`` with integer
    axis arrays and uint32 FP32 arrays of shape ``(...)``.
    """
    d = _u32(direction)
    mag = d & np.uint32(_MAG)
    mx, my, mz = mag[..., 0], mag[..., 1], mag[..., 2]
    kz = np.where((mx >= my) & (mx >= mz), 0, np.where(my >= mz, 1, 2))
    kx = (kz + 1) % 3
    ky = (kx + 1) % 3
    dz = np.take_along_axis(d, kz[..., None], axis=-1)[..., 0]
    swap = np.asarray(fp32.lt(dz, 0), dtype=bool)
    kx, ky = np.where(swap, ky, kx), np.where(swap, kx, ky)
    dx = np.take_along_axis(d, kx[..., None], axis=-1)[..., 0]
    dy = np.take_along_axis(d, ky[..., None], axis=-1)[..., 0]
    sx = _u32(fp32.div(dx, dz))
    sy = _u32(fp32.div(dy, dz))
    sz = _u32(fp32.div(np.full_like(dz, ONE), dz))
    return kx, ky, kz, sx, sy, sz


def _perm(p, k):
    return np.take_along_axis(p, np.asarray(k)[..., None], axis=-1)[..., 0]


def intersect(origin, setup, a, b, c):
    """The watertight test (module doc string, steps 1-7), vectorised.

    ``origin``, ``a``, ``b``, ``c``: uint32 arrays ``(..., 3)`` (broadcast together with the setup
    arrays of :func:`ray_setup`). Returns a dict of arrays: ``hit`` (bool), ``t``, ``i``, ``j``,
    ``det``, ``t_num`` (= T), ``u``, ``v``, ``w`` (uint32), ``backface`` (bool, sign of det).
    """
    kx, ky, kz, sx, sy, sz = setup
    o = _u32(origin)
    nsx, nsy = sx ^ np.uint32(SIGN), sy ^ np.uint32(SIGN)
    pts = []
    for p in (a, b, c):
        rel = _u32(fp32.sub(_u32(p), o))
        rx, ry, rz = _perm(rel, kx), _perm(rel, ky), _perm(rel, kz)
        pts.append((_u32(fp32.fma(nsx, rz, rx)), _u32(fp32.fma(nsy, rz, ry)), rz))
    (ax, ay, az), (bx, by, bz), (cx, cy, cz) = pts
    u = _u32(fp32.sub(fp32.mul(cx, by), fp32.mul(cy, bx)))
    v = _u32(fp32.sub(fp32.mul(ax, cy), fp32.mul(ay, cx)))
    w = _u32(fp32.sub(fp32.mul(bx, ay), fp32.mul(by, ax)))
    neg = np.zeros(u.shape, dtype=bool)
    pos = np.zeros(u.shape, dtype=bool)
    for e in (u, v, w):
        neg |= np.asarray(fp32.lt(e, 0), dtype=bool)
        pos |= np.asarray(fp32.lt(0, e), dtype=bool)
    inside = ~(neg & pos)
    det = _u32(fp32.add(fp32.add(u, v), w))
    azs = _u32(fp32.mul(sz, az))
    bzs = _u32(fp32.mul(sz, bz))
    czs = _u32(fp32.mul(sz, cz))
    tnum = _u32(fp32.fma(w, czs, fp32.fma(v, bzs, fp32.mul(u, azs))))
    t = _u32(fp32.div(tnum, det))
    i = _u32(fp32.div(v, det))
    j = _u32(fp32.div(w, det))
    det_ok = ~np.asarray(fp32.unordered(det, det), dtype=bool) & ~np.asarray(
        fp32.eq(det, 0), dtype=bool
    )
    t_ok = np.asarray(fp32.le(0, t), dtype=bool) & np.asarray(fp32.lt(t, POS_INF), dtype=bool)
    hit = inside & det_ok & t_ok
    return {
        "hit": hit,
        "t": t,
        "i": i,
        "j": j,
        "det": det,
        "t_num": tnum,
        "u": u,
        "v": v,
        "w": w,
        "backface": (det >> np.uint32(31)).astype(bool),
    }


def effective_flags(pointer_flags, desc):
    """Pointer flags as the hardware sees them: 0 unless the T# enables them."""
    return int(pointer_flags) & 0x3FF if desc.get("pointer_flags_en", 1) else 0


def triangle_result_dwords(hit, t, i, j, backface, *, flags, opaque, procedural, prim_id):
    """DW0..3 of one triangle from the geometric outcome (scalars; see the module doc string)."""
    force_op, force_nop = flags & PF_FORCE_OPAQUE, flags & PF_FORCE_NON_OPAQUE
    is_opaque = bool(force_op) or (not force_nop and bool(opaque))
    opaque_culled = bool(flags & PF_CULL_OPAQUE) if is_opaque else bool(flags & PF_CULL_NON_OPAQUE)
    if procedural:
        culled = bool(flags & PF_SKIP_PROCEDURAL) or opaque_culled
        if culled:
            dw = [POS_INF, 0, 0, 0]
        else:
            dw = [0, ONE, ONE, 0]
    else:
        front = (not backface) ^ bool(flags & PF_FLIP_FACEDNESS)
        face_culled = not (flags & PF_DISABLE_TRI_CULL) and bool(
            flags & (PF_CULL_FRONT if front else PF_CULL_BACK)
        )
        culled = bool(flags & PF_SKIP_TRIANGLES) or opaque_culled or face_culled
        if hit and not culled:
            dw = [int(t), int(i), int(j), int(not front)]
        else:
            dw = [POS_INF, 0, 0, 0]
    dw[1] = (dw[1] & _MAG) | (SIGN if procedural else 0)
    dw[2] = (dw[2] & _MAG) | (0 if is_opaque else SIGN)
    dw[3] = ((int(prim_id) << 1) | dw[3]) & _M32
    return dw


def triangle_pair_eval(node, node_ptr, ray, pointer_flags, desc):
    """``{"dwords": [10 x uint32], "error": bool, "decode": PairDecode}`` (module doc string)."""
    return triangle_pair_eval_batch([(node, node_ptr, ray, pointer_flags, desc)])[0]


def triangle_pair_eval_batch(items):
    """:func:`triangle_pair_eval` of many ``(node, node_ptr, ray, pointer_flags, desc)`` tuples,
    with the FP32 work of all triangles vectorised in one pass."""
    decs, origins, dirs, verts = [], [], [], []
    for node, node_ptr, ray, _flags, _desc in items:
        dec = pn.decode_pair(node, pair_index(int(node_ptr) & _M32))
        decs.append(dec)
        for tri in dec.tris:
            origins.append(ray["origin"])
            dirs.append(ray["dir"])
            verts.append(tri.vertices if not tri.procedural else ((0, 0, 0),) * 3)
    if not items:
        return []
    v = np.array(verts, dtype=np.uint32)
    res = intersect(
        np.array(origins, dtype=np.uint32),
        ray_setup(np.array(dirs, dtype=np.uint32)),
        v[:, 0],
        v[:, 1],
        v[:, 2],
    )
    out = []
    for n, ((_node, node_ptr, _ray, pointer_flags, desc), dec) in enumerate(zip(items, decs)):
        flags = effective_flags(pointer_flags, desc)
        dwords = []
        for k, tri in enumerate(dec.tris):
            if k == 1 and not tri.valid:
                dwords += [POS_INF, ONE, ONE, 0]
                continue
            r = 2 * n + k
            dwords += triangle_result_dwords(
                bool(res["hit"][r]),
                int(res["t"][r]),
                int(res["i"][r]),
                int(res["j"][r]),
                bool(res["backface"][r]),
                flags=flags,
                opaque=tri.opaque,
                procedural=tri.procedural,
                prim_id=tri.prim_id,
            )
        dwords += [((tri.geo_id << 2) | dec.navigation) & _M32 for tri in dec.tris]
        error = bool(dec.error or (int(node_ptr) & 7) > 3)
        out.append({"dwords": dwords, "error": error, "decode": dec})
    return out


def triangle_pair_result(node, node_ptr, ray, pointer_flags, desc):
    """The 10 result dwords of ``image_bvh8_intersect_ray`` on a triangle-pair pointer (gpurt
    ``rtip3_opcode_emulation.hlsl`` ``IntersectTriangle3_1``).

    ``node``: the 128 node bytes (or 32 dwords); ``node_ptr``: the 32-bit pointer (pair index from
    bits 0, 1 and 3); ``ray``: a ``RAY_LAYOUT`` dictionary; ``pointer_flags``: the 10 flags of BVH
    base bits 54..63; ``desc``: a ``DESC_LAYOUT`` dictionary.
    """
    return triangle_pair_eval(node, node_ptr, ray, pointer_flags, desc)["dwords"]


def legacy_triangle_result(node, node_ptr, ray, pointer_flags, desc, *, layout="rtip3_0"):
    """4 result dwords of the dual instruction on a legacy 64-byte triangle node (module doc)."""
    return legacy_triangle_result_batch(
        [(node, node_ptr, ray, pointer_flags, desc)], layout=layout
    )[0]


def legacy_triangle_result_batch(items, *, layout="rtip3_0"):
    """:func:`legacy_triangle_result` of many ``(node, node_ptr, ray, pointer_flags, desc)``
    tuples, with the FP32 work vectorised in one pass."""
    if not items:
        return []
    decs, verts, origins, dirs = [], [], [], []
    for node, node_ptr, ray, _flags, _desc in items:
        node_type = int(node_ptr) & 7
        if node_type > 1:
            raise ValueError(f"a legacy triangle pointer has type 0 or 1, not {node_type}")
        dec = pn.decode_legacy_node(node, layout=layout)
        decs.append((dec, node_type))
        verts.append(pn.legacy_triangle_vertices(dec, node_type))
        origins.append(ray["origin"])
        dirs.append(ray["dir"])
    v = np.array(verts, dtype=np.uint32)
    res = intersect(
        np.array(origins, dtype=np.uint32),
        ray_setup(np.array(dirs, dtype=np.uint32)),
        v[:, 0],
        v[:, 1],
        v[:, 2],
    )
    out = []
    for n, ((_node, _node_ptr, _ray, pointer_flags, desc), (dec, node_type)) in enumerate(
        zip(items, decs)
    ):
        flags = effective_flags(pointer_flags, desc)
        tri_flags = (dec.triangle_id >> (8 * node_type)) & 0xFF
        force_op, force_nop = flags & PF_FORCE_OPAQUE, flags & PF_FORCE_NON_OPAQUE
        is_opaque = bool(force_op) or (not force_nop and bool(tri_flags & 0x80))
        opaque_culled = (
            bool(flags & PF_CULL_OPAQUE) if is_opaque else bool(flags & PF_CULL_NON_OPAQUE)
        )
        flip = bool(flags & PF_FLIP_FACEDNESS)
        front = (not bool(res["backface"][n])) ^ flip
        face_culled = not (flags & PF_DISABLE_TRI_CULL) and bool(
            flags & (PF_CULL_FRONT if front else PF_CULL_BACK)
        )
        culled = bool(flags & PF_SKIP_TRIANGLES) or opaque_culled or face_culled
        if not bool(res["hit"][n]) or culled:
            out.append([POS_INF, ONE, 0, 0])
            continue
        sign = SIGN if flip else 0
        t_num, t_den = int(res["t_num"][n]) ^ sign, int(res["det"][n]) ^ sign
        if desc.get("return_mode", 1):
            bary = [int(res["u"][n]), int(res["v"][n]), int(res["w"][n]), 0]
            out.append([t_num, t_den, bary[tri_flags & 3], bary[(tri_flags >> 2) & 3]])
        else:
            out.append([t_num, t_den, dec.triangle_id & _M32, 1])
    return out
