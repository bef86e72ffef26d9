"""Registry entry of the ray accelerator's triangle path: block ``ray_triangle``.

Input: a ray, the 32 dwords of a 128-byte primitive node, the node pointer, the 10 pointer flags
and the T# descriptor fields; output: the 10 result dwords of gpurt ``rtip3_opcode_emulation.hlsl``
``IntersectTriangle3_1`` and a misuse flag
(:mod:`gpurtl.hdl.ray_accel.triangle_pair`, golden
:func:`gpurtl.golden.ray_accel.scalar.triangle.triangle_pair_eval`).

The stimulus builds REAL nodes with :func:`gpurtl.golden.ray_accel.encode.primitive_node.encode_primitive_node`
(random shared-vertex pairs, procedural nodes), aims rays at the triangles (interiors, exact edge
and vertex points of dyadic meshes, near misses), and mixes in IEEE corner cases (zero, infinite and
NaN direction components and origins, degenerate, huge and subnormal triangles), random pointer
flags and descriptors, and a few arbitrary-bit (malformed) nodes.
"""

import numpy as np

from gpurtl.facts.fp32 import f32_bits
from gpurtl.facts.ray_accel import FIELD_NOTES
from gpurtl.golden.ray_accel.encode import meshes
from gpurtl.golden.ray_accel.encode import primitive_node as pn
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.scalar import triangle as tr

from ..core.registry import Block, Param, register

__all__ = [
    "RayTriangleModel",
    "RayTriangleLegacyModel",
    "PrimitiveDecodeModel",
    "stimulus",
    "legacy_stimulus",
    "decode_stimulus",
    "pair_pointer",
    "stages_of",
]

_STAGE_PARAMS = tuple(
    Param(
        f"{unit}_stages",
        -1,
        f"register stages of each FP32 {unit} core (-1 = core default)",
        range=(-1, 16),
    )
    for unit in ("add", "mul", "fma", "div")
)

_SPECIAL = [
    0x00000000,
    0x80000000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0x00000001,
    0x807FFFFF,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x3F800000,
]


def pair_pointer(pair, node_index=1):
    """Node pointer of pair ``pair`` (0..7) of the 128-byte node at byte ``128 * node_index``."""
    return ((node_index * 128) >> 3) | (pair & 3) | ((pair & 4) << 1)


def stages_of(params):
    """The FP32 core depth dictionary (``TriangleEngine`` ``stages``) of block parameters."""
    return _stages(**params)


def _stages(add_stages, mul_stages, fma_stages, div_stages):
    return {
        k: (None if v < 0 else v)
        for k, v in (
            ("add", add_stages),
            ("mul", mul_stages),
            ("fma", fma_stages),
            ("div", div_stages),
        )
    }


class RayTriangleModel:
    """Golden model of ``ray_triangle``: ``{"result": [10 dwords], "error": 0/1}``."""

    def __call__(self, tx):
        return self.batch([tx])[0]

    def batch(self, txs):
        evs = tr.triangle_pair_eval_batch(
            [(tx["node"], tx["node_ptr"], tx["ray"], tx["pointer_flags"], tx["desc"]) for tx in txs]
        )
        return [{"result": ev["dwords"], "error": int(ev["error"])} for ev in evs]


def _ray(origin, direction, rng):
    extent = f32_bits(float(rng.uniform(0.5, 100.0)))
    return {
        "origin": [int(v) & 0xFFFFFFFF for v in origin],
        "dir": [int(v) & 0xFFFFFFFF for v in direction],
        "extent": extent,
        "instance_mask": int(rng.integers(0, 256)),
    }


def _bits3(v):
    return [f32_bits(float(x)) for x in v]


def _flags(rng):
    roll = rng.random()
    if roll < 0.45:
        return 0
    if roll < 0.8:
        return int(1 << rng.integers(0, 10))
    return int(rng.integers(0, 1 << 10))


def _desc(rng):
    return default_desc(
        pointer_flags_en=int(rng.random() < 0.85), return_mode=int(rng.integers(0, 2))
    )


def _random_pairs(rng, scale):
    pool = (rng.normal(0, scale, (int(rng.integers(3, 9)), 3))).astype(np.float32)
    if rng.random() < 0.5:  # coarse grid coordinates: trailing-zero compression kicks in
        pool = (np.round(pool * 4) / 4).astype(np.float32)
    anchor_p = int(rng.integers(0, 1 << int(rng.integers(1, 31))))
    anchor_g = int(rng.integers(0, 1 << int(rng.integers(1, 30))))
    pairs = []
    for _ in range(int(rng.integers(1, 9))):
        tris = []
        for k in range(2):
            if k == 1 and rng.random() < 0.2:
                tris.append(None)
                continue
            idx = rng.choice(len(pool), 3, replace=False)
            tris.append(
                pn.Triangle(
                    tuple(tuple(float(c) for c in pool[i]) for i in idx),
                    prim_id=(anchor_p ^ int(rng.integers(0, 64))) & 0x7FFFFFFF,
                    geo_id=(anchor_g ^ int(rng.integers(0, 16))) & 0x3FFFFFFF,
                    opaque=int(rng.integers(0, 2)),
                    double_sided=int(rng.integers(0, 2)),
                )
            )
        pairs.append(pn.TrianglePair(tris[0], tris[1], range_stop=int(rng.random() < 0.3)))
    return pairs


def _encode_fitting(rng, scale):
    while True:
        pairs = _random_pairs(rng, scale)
        while pairs:
            try:
                return pn.encode_primitive_node(pairs), pairs
            except ValueError:
                pairs = pairs[:-1]


def _aim(rng, tri_bits, mode):
    """A ray at a triangle: interior / edge / vertex point, from a random side."""
    v = np.array(tri_bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    if mode == "interior":
        w = rng.dirichlet([1, 1, 1])
    elif mode == "edge":
        s = rng.uniform()
        w = np.roll([s, 1 - s, 0.0], int(rng.integers(0, 3)))
    else:
        w = np.roll([1.0, 0.0, 0.0], int(rng.integers(0, 3)))
    target = w @ v
    d = rng.normal(size=3)
    if rng.random() < 0.15:
        d[int(rng.integers(0, 3))] = 0.0
    origin = target - d * rng.uniform(0.5, 5.0)
    return _bits3(origin), _bits3(d)


def _mesh_edge_cases(rng, count):
    """Exact edge / vertex rays against a dyadic closed mesh packed into real nodes."""
    v, f = meshes.dyadic_box(2, 8, rng=rng, jitter=1)
    tris = [
        pn.Triangle(
            tuple(tuple(float(c) for c in v[k]) for k in face),
            prim_id=n,
            geo_id=7,
            opaque=int(n % 3 != 0),
        )
        for n, face in enumerate(f)
    ]
    where = [(node, pair, tri) for node, slots in pn.pack_triangles(tris) for pair, tri in slots]
    origins, dirs, cands = meshes.edge_vertex_rays(rng, v, f, per_edge=1, exact=True)
    out = []
    for r in rng.permutation(len(cands))[:count]:
        face = int(rng.choice(cands[r]))
        node, pair, _ = where[face]
        out.append(
            {
                "ray": _ray(_bits3(origins[r]), _bits3(dirs[r]), rng),
                "node": pn.node_int(node),
                "node_ptr": pair_pointer(pair),
                "pointer_flags": 0 if rng.random() < 0.7 else _flags(rng),
                "desc": _desc(rng),
            }
        )
    return out


def _to_tx(node, ptr, ray, flags, desc):
    n = pn.node_int(node) if not isinstance(node, int) else node
    return {
        "ray": ray,
        "node": [(n >> (32 * k)) & 0xFFFFFFFF for k in range(32)],
        "node_ptr": int(ptr) & 0xFFFFFFFF,
        "pointer_flags": int(flags),
        "desc": desc,
    }


def stimulus(rng, count, **_params):
    """Random ``ray_triangle`` transactions (see the module doc string)."""
    txs = []
    n_mesh = max(1, count // 8)
    for tx in _mesh_edge_cases(rng, n_mesh):
        txs.append(_to_tx(tx["node"], tx["node_ptr"], tx["ray"], tx["pointer_flags"], tx["desc"]))
    while len(txs) < count:
        roll = rng.random()
        if roll < 0.04:
            node = int.from_bytes(rng.bytes(128), "little")
            ptr = int(rng.integers(0, 1 << 32))
            o, d = rng.normal(size=3), rng.normal(size=3)
            txs.append(_to_tx(node, ptr, _ray(_bits3(o), _bits3(d), rng), _flags(rng), _desc(rng)))
            continue
        if roll < 0.10:
            lo = rng.normal(0, 3, 3)
            node = pn.encode_procedural_node(
                tuple(lo),
                tuple(lo + 1),
                prim_id=int(rng.integers(0, 1 << 31)),
                geo_id=int(rng.integers(0, 1 << 30)),
                opaque=int(rng.integers(0, 2)),
            )
            o, d = _aim(rng, [_bits3(lo), _bits3(lo + 1), _bits3(lo + [1, 0, 0])], "interior")
            txs.append(_to_tx(node, pair_pointer(0), _ray(o, d, rng), _flags(rng), _desc(rng)))
            continue
        scale = float(rng.choice([1.0, 1.0, 1.0, 1e-3, 1e4, 1e-38, 1e30]))
        node, pairs = _encode_fitting(rng, scale)
        pair = int(rng.integers(0, len(pairs))) if rng.random() < 0.93 else int(rng.integers(0, 8))
        ptr = pair_pointer(pair, int(rng.integers(1, 1000)))
        if rng.random() < 0.03:
            ptr |= int(rng.choice([4, 5, 6, 7]))  # not a triangle type: misuse
        src = pairs[min(pair, len(pairs) - 1)]
        tri = src.tri0 if (src.tri1 is None or rng.random() < 0.5) else src.tri1
        mode = rng.choice(["interior", "interior", "edge", "vertex", "miss"])
        o, d = _aim(rng, tri.bits(), "interior" if mode == "miss" else mode)
        if mode == "miss":
            d = _bits3(rng.normal(size=3))
        if rng.random() < 0.12:  # IEEE corner cases
            which = rng.integers(0, 3)
            if which == 0:
                d[int(rng.integers(0, 3))] = int(rng.choice(_SPECIAL))
            elif which == 1:
                o[int(rng.integers(0, 3))] = int(rng.choice(_SPECIAL))
            else:
                d = [0, 0, 0] if rng.random() < 0.5 else [0x80000000, 0, 0]
        txs.append(_to_tx(node, ptr, _ray(o, d, rng), _flags(rng), _desc(rng)))
    return txs[:count]


def _layouts(**_params):
    from gpurtl.hdl.ray_accel.triangle_pair import PAIR_IN_LAYOUT, PAIR_OUT_LAYOUT

    return PAIR_IN_LAYOUT, PAIR_OUT_LAYOUT


def _build(**params):
    from gpurtl.hdl.ray_accel.triangle_pair import RayTriangle

    return RayTriangle(stages=_stages(**params))


def _defaults(**_params):
    return {"pointer_flags": 0, "desc": default_desc(), "node_ptr": pair_pointer(0)}


register(
    Block(
        name="ray_triangle",
        notes=lambda **_: FIELD_NOTES,
        doc="RT IP 3.1 triangle-pair test: compressed node decode + 2 watertight FP32 triangle tests/cycle",
        kind="pipeline",
        params=_STAGE_PARAMS,
        build=_build,
        golden=lambda **params: RayTriangleModel(),
        layouts=_layouts,
        stimulus=stimulus,
        defaults=_defaults,
        check_count=300,
    )
)


# --- ray_triangle_legacy ---------------------------------------------------------------------------


class RayTriangleLegacyModel:
    """Golden model of ``ray_triangle_legacy``: two legacy nodes per transaction."""

    def __call__(self, tx):
        return self.batch([tx])[0]

    def batch(self, txs):
        items = []
        for tx in txs:
            for k in range(2):
                node = b"".join(int(d).to_bytes(4, "little") for d in tx["node"][k])
                items.append(
                    (node, int(tx["node_ptr"][k]) & 1, tx["ray"], tx["pointer_flags"], tx["desc"])
                )
        res = tr.legacy_triangle_result_batch(items)
        return [
            {
                "result": [list(res[2 * n]), list(res[2 * n + 1])],
                "error": [int((int(p) & 7) > 1) for p in tx["node_ptr"]],
            }
            for n, tx in enumerate(txs)
        ]


def legacy_stimulus(rng, count, **_params):
    """Legacy triangle-node pairs (quads sharing the v1-v2 edge), rays at interiors, shared
    edges and vertices, random triangle-id flags, pointer flags, return modes and IEEE cases."""
    txs = []
    for _ in range(count):
        nodes, ptrs = [], []
        scale = float(rng.choice([1.0, 1.0, 1e-3, 1e5, 1e-38]))
        quad = (rng.normal(0, scale, (4, 3))).astype(np.float32)
        if rng.random() < 0.4:
            quad = (np.round(quad * 8) / 8).astype(np.float32)
        for k in range(2):
            q = (
                quad
                if k == 0 or rng.random() < 0.5
                else rng.normal(0, 1, (4, 3)).astype(np.float32)
            )
            tri_id = int(rng.integers(0, 1 << 16))
            node = pn.encode_legacy_node(
                [tuple(float(c) for c in v) for v in q],
                prim_index=(int(rng.integers(0, 1 << 32)), int(rng.integers(0, 1 << 32))),
                geometry_index=int(rng.integers(0, 1 << 24)),
                triangle_id=tri_id,
            )
            nodes.append([int.from_bytes(node[4 * n : 4 * n + 4], "little") for n in range(16)])
            ptr = (int(rng.integers(1, 1 << 20)) << 3) | int(rng.integers(0, 2))
            if rng.random() < 0.03:
                ptr |= int(rng.choice([2, 4, 6]))
            ptrs.append(ptr)
        t = pn.legacy_triangle_vertices(
            pn.decode_legacy_node(b"".join(int(d).to_bytes(4, "little") for d in nodes[0])),
            ptrs[0] & 1,
        )
        o, d = _aim(rng, t, rng.choice(["interior", "edge", "vertex", "interior"]))
        if rng.random() < 0.1:
            d[int(rng.integers(0, 3))] = int(rng.choice(_SPECIAL))
        txs.append(
            {
                "ray": _ray(o, d, rng),
                "node": nodes,
                "node_ptr": ptrs,
                "pointer_flags": _flags(rng),
                "desc": _desc(rng),
            }
        )
    return txs


def _legacy_layouts(**_params):
    from gpurtl.hdl.ray_accel.legacy_triangle import LEGACY_IN_LAYOUT, LEGACY_OUT_LAYOUT

    return LEGACY_IN_LAYOUT, LEGACY_OUT_LAYOUT


def _legacy_build(**params):
    from gpurtl.hdl.ray_accel.legacy_triangle import RayTriangleLegacy

    return RayTriangleLegacy(stages=_stages(**params))


register(
    Block(
        name="ray_triangle_legacy",
        notes=lambda **_: FIELD_NOTES,
        doc="Legacy 64 B triangle nodes of the dual instruction: 2 watertight FP32 tests/cycle, 4-dword results",
        kind="pipeline",
        params=_STAGE_PARAMS,
        build=_legacy_build,
        golden=lambda **params: RayTriangleLegacyModel(),
        layouts=_legacy_layouts,
        stimulus=legacy_stimulus,
        check_count=200,
    )
)


# --- ray_primitive_decode --------------------------------------------------------------------------


class PrimitiveDecodeModel:
    """Golden model of ``ray_primitive_decode`` (``PAIR_LAYOUT`` dictionaries). Procedural
    triangles carry the compressed-format vertices of their indices, as the RTL does (the triangle
    test ignores them)."""

    def __call__(self, tx):
        n = pn.node_int(tx["node"])
        ptr = int(tx["node_ptr"])
        d = pn.decode_pair(n, (ptr & 3) | ((ptr & 8) >> 1))
        tris = []
        for k, tri in enumerate(d.tris):
            idx = d.desc.tri0 if k == 0 else d.desc.tri1
            verts = [list(pn.read_vertex(n, i, d.header)) for i in idx]
            tris.append(
                {
                    "v": verts,
                    "prim_id": tri.prim_id,
                    "geo_id": tri.geo_id,
                    "opaque": tri.opaque,
                    "procedural": int(tri.procedural),
                    "valid": int(tri.valid),
                }
            )
        return {"tri": tris, "nav": d.navigation, "error": int(d.error or (ptr & 7) > 3)}


def decode_stimulus(rng, count, **_params):
    """Real encoded nodes (random pairs, procedural nodes) and arbitrary-bit nodes."""
    txs = []
    while len(txs) < count:
        roll = rng.random()
        if roll < 0.2:
            node = int.from_bytes(rng.bytes(128), "little")
        elif roll < 0.3:
            lo = rng.normal(0, 3, 3)
            node = pn.node_int(
                pn.encode_procedural_node(
                    tuple(lo), tuple(lo + 1), prim_id=int(rng.integers(0, 1 << 31))
                )
            )
        else:
            node = pn.node_int(_encode_fitting(rng, float(rng.choice([1.0, 1e-3, 1e5])))[0])
        txs.append(
            {
                "node": [(node >> (32 * k)) & 0xFFFFFFFF for k in range(32)],
                "node_ptr": int(rng.integers(0, 1 << 32)),
            }
        )
    return txs


def _decode_layouts(**_params):
    from gpurtl.hdl.ray_accel.primitive_decode import DECODE_IN_LAYOUT, PAIR_LAYOUT

    return DECODE_IN_LAYOUT, PAIR_LAYOUT


def _decode_build(**_params):
    from gpurtl.hdl.ray_accel.primitive_decode import PrimitiveDecode

    return PrimitiveDecode()


register(
    Block(
        name="ray_primitive_decode",
        notes=lambda **_: {
            "in": {},
            "out": {
                "nav": f"where traversal goes after this pair: {pn.NAV_END_OF_PAIR} the next pair "
                f"of the node, {pn.NAV_END_OF_NODE} pair 0 of the next node, "
                f"{pn.NAV_END_OF_RANGE} the range is done"
            },
        },
        doc="RT IP 3.1 compressed primitive node: one triangle pair decoded (vertices, IDs, flags, nav)",
        kind="pipeline",
        params=(),
        build=_decode_build,
        golden=lambda **params: PrimitiveDecodeModel(),
        layouts=_decode_layouts,
        stimulus=decode_stimulus,
        check_count=1000,
    )
)
