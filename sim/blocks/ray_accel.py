"""Registry entry of the ray accelerator top level: block ``ray_accel``.

One transaction = one intersect instruction (``INSTR_LAYOUT`` of ``golden/ray_accel/encode/ray.py``);
the result is ``OUT_LAYOUT`` (10 dwords, the returned ray, a status). The golden model is
:class:`~gpurtl.golden.ray_accel.scalar.intersect.IntersectModel` restricted to the node kinds the RTL
build models (``RayAccel.paths``); other kinds give status 1 on both sides.

The stimulus builds REAL nodes with the encoders of ``golden/ray_accel/encode/box_node.py``: child boxes
scattered along and around a random ray (so hits, misses and grazing boxes all occur), random
child types, ranges (child reuse), cull flags and masks; legacy FP32/FP16 BVH4 node pairs for the
dual form; plus IEEE corner cases on the ray (zero, -0, infinite, NaN, subnormal and huge
direction components, zero/NaN/infinite extents), every heuristic and descriptor mode, random
pointer flags, other node types and garbage node bytes.
"""

import importlib

import numpy as np

from gpurtl.facts.fp32 import f32_bits
from gpurtl.facts.ray_accel import FIELD_NOTES, INSTR_LAYOUT, INVALID_NODE, OUT_LAYOUT
from gpurtl.golden.ray_accel.encode import box_node
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel
from gpurtl.hdl.ray_accel.presets import (
    FP_PRESETS,
    box_engine_stages,
    ray_setup_stages,
    sort_stages,
)

from ..core.registry import Block, Param, register
from . import ray_accel_words
from .ray_accel_words import golden_words

__all__ = ["stimulus"]

_CORNER = [
    0.0,
    -0.0,
    float("inf"),
    float("-inf"),
    float("nan"),
    1e-40,
    -1e-42,
    3e38,
    -2e-38,
    1.0,
    -1.0,
]


def _f(value):
    return f32_bits(float(np.float32(value)))


def _ray(rng):
    o = rng.normal(size=3) * 2.0 ** int(rng.integers(-6, 8))
    d = rng.normal(size=3)
    if rng.random() < 0.25:  # axis-aligned rays: exact zero components
        d[rng.random(3) < 0.5] = 0.0
    if rng.random() < 0.15:  # IEEE corner cases in the direction
        for a in range(3):
            if rng.random() < 0.5:
                d[a] = _CORNER[int(rng.integers(0, len(_CORNER)))]
    roll = rng.random()
    extent = (
        float("inf")
        if roll < 0.5
        else (
            float(rng.choice([0.0, float("nan"), -1.0]))
            if roll < 0.58
            else float(abs(rng.normal()) * 2.0 ** int(rng.integers(-2, 8)))
        )
    )
    if rng.random() < 0.05:
        o[int(rng.integers(0, 3))] = _CORNER[int(rng.integers(0, len(_CORNER)))]
    mask = 0xFF if rng.random() < 0.7 else int(rng.integers(0, 256))
    return (
        {
            "origin": [_f(v) for v in o],
            "dir": [_f(v) for v in d],
            "extent": _f(extent),
            "instance_mask": mask,
        },
        o,
        d,
    )


def _boxes_along(rng, o, d, n):
    """``n`` child boxes near the ray: centred on points o + t d, some pushed off the ray."""
    d = np.nan_to_num(np.clip(d, -1e6, 1e6), nan=1.0)
    o = np.nan_to_num(np.clip(o, -1e30, 1e30), nan=0.0)
    scale = float(np.linalg.norm(d)) + 1e-3
    out = []
    for _ in range(n):
        t = float(rng.uniform(-1.0, 6.0))
        centre = o + t * d
        size = np.abs(rng.normal(size=3)) * scale * float(rng.choice([0.05, 0.3, 1.0]))
        if rng.random() < 0.35:
            centre = centre + rng.normal(size=3) * scale * 2
        if rng.random() < 0.1:
            size[int(rng.integers(0, 3))] = 0.0  # flat box
        lo = (centre - size / 2).astype(np.float32)
        hi = np.maximum((centre + size / 2).astype(np.float32), lo)
        out.append(([float(v) for v in lo], [float(v) for v in hi]))
    return out


def _desc(rng):
    return default_desc(
        sort_en=int(rng.random() < 0.85),
        heuristic=int(rng.integers(0, 4)),
        sort_tri_first=int(rng.integers(0, 2)),
        box_grow=6 if rng.random() < 0.6 else int(rng.choice([0, 1, 7, 255, rng.integers(0, 256)])),
        wide_sort=int(rng.integers(0, 2)),
        return_mode=int(rng.integers(0, 2)),
        compressed=1,
        box_node_64b=int(rng.random() < 0.1),
        instance_en=int(rng.random() < 0.8),
        pointer_flags_en=int(rng.random() < 0.9),
    )


def _bvh8_node(rng, o, d):
    n = int(rng.integers(1, 9))
    boxes = _boxes_along(rng, o, d, n)
    kids = []
    for _k, (lo, hi) in enumerate(boxes):
        roll = rng.random()
        ctype = 5 if roll < 0.5 else int(rng.choice([0, 1, 2, 3, 8, 9, 10, 11, 6]))
        kids.append(
            {
                "min": lo,
                "max": hi,
                "type": ctype,
                "range": int(rng.choice([0, 1, 1, 2])),
                "cull_flags": int(rng.integers(0, 16)) if rng.random() < 0.2 else 0,
                "mask": 0xFF if rng.random() < 0.8 else int(rng.integers(0, 256)),
            }
        )
    try:
        node = box_node.encode_box8(
            kids,
            internal_base=int(rng.integers(0, 1 << 20)) << 4,
            leaf_base=int(rng.integers(0, 1 << 20)) << 4,
            obb_index=0x7F if rng.random() < 0.93 else int(rng.integers(0, 128)),
        )
    except ValueError:
        node = [int(v) for v in rng.integers(0, 1 << 32, 32, dtype=np.uint64)]
    return node


def _legacy_node(rng, o, d, fp16):
    n = int(rng.integers(1, 5))
    kids = []
    for _k, (lo, hi) in enumerate(_boxes_along(rng, o, d, n)):
        if fp16:
            lo = [float(np.clip(v, -6e4, 6e4)) for v in lo]
            hi = [float(np.clip(v, -6e4, 6e4)) for v in hi]
        ptr = (int(rng.integers(0, 1 << 26)) << 3) | int(rng.choice([0, 1, 4, 5, 6, 7]))
        kids.append(
            {
                "min": lo,
                "max": hi,
                "ptr": ptr,
                "cull_flags": int(rng.integers(0, 16)) if rng.random() < 0.2 else 0,
            }
        )
    return box_node.encode_box4_fp16(kids) if fp16 else box_node.encode_box4_fp32(kids)


def _instance_node(rng, o, d):
    """An instance node (:func:`~gpurtl.golden.ray_accel.scalar.instance.encode_instance`) whose filter
    box (this package's BVH8 encoder) surrounds
    the ray mapped into object space: world_to_object = a random rotation-ish matrix plus a
    translation."""
    from gpurtl.golden.ray_accel.scalar import instance

    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    w = np.concatenate([q * float(rng.choice([1.0, 0.5, 2.0])), rng.normal(size=(3, 1)) * 4], 1)
    w = w.astype(np.float32).astype(np.float64)
    o = np.nan_to_num(np.clip(o, -1e6, 1e6))
    d = np.nan_to_num(np.clip(d, -1e6, 1e6), nan=1.0)
    oo, dd = w[:, :3] @ o + w[:, 3], w[:, :3] @ d
    n = int(rng.integers(1, 5))
    kids = [
        {
            "min": lo,
            "max": hi,
            "type": 5 if rng.random() < 0.6 else int(rng.integers(0, 16)),
            "range": int(rng.choice([0, 1])),
        }
        for lo, hi in _boxes_along(rng, oo, dd, n)
    ]
    try:
        filt = box_node.encode_box8(kids)
    except ValueError:
        filt = _random_node(rng)
    child_base = int(rng.integers(0, 1 << 50)) << 3 | (int(rng.integers(0, 1 << 10)) << 54)
    return instance.encode_instance(
        [[float(v) for v in row] for row in w],
        child_base,
        user_data=int(rng.integers(0, 1 << 24)),
        mask=0xFF if rng.random() < 0.8 else int(rng.integers(0, 256)),
        filter_origin=filt[3:6],
        filter_exp=[(filt[6] >> (8 * a)) & 0xFF for a in range(3)],
        filter_count=min(n, 4),
        filter_info=[filt[8 + 3 * k : 11 + 3 * k] for k in range(n)],
    )


def _triangle_txs(rng, count):
    """Triangle-pair instructions from the ``ray_triangle`` stimulus (real compressed nodes,
    rays aimed at interiors, edges, vertices, misses, IEEE corner cases)."""
    from . import ray_triangle

    out = []
    for tx in ray_triangle.stimulus(rng, count):
        out.append(
            {
                "dual": 0,
                "ray": tx["ray"],
                "node_ptr": [tx["node_ptr"], 0],
                "node": [list(tx["node"]), [0] * 32],
                "pointer_flags": tx["pointer_flags"],
                "desc": dict(default_desc(), **tx["desc"]),
            }
        )
    return out


def _legacy_triangles(rng, o, d):
    """A legacy 64 B triangle node
    (:func:`~gpurtl.golden.ray_accel.encode.primitive_node.encode_legacy_node`) with its 4 vertices around
    a point of the ray."""
    from gpurtl.golden.ray_accel.encode import primitive_node
    from gpurtl.golden.ray_accel.encode.ray import node_dwords

    o = np.nan_to_num(np.clip(o, -1e6, 1e6))
    d = np.nan_to_num(np.clip(d, -1e6, 1e6), nan=1.0)
    centre = o + float(rng.uniform(-0.5, 4.0)) * d
    size = (float(np.linalg.norm(d)) + 1e-3) * float(rng.choice([0.2, 1.0, 3.0]))
    verts = [
        tuple(float(np.float32(v)) for v in centre + rng.normal(size=3) * size) for _ in range(4)
    ]
    raw = primitive_node.encode_legacy_node(
        verts,
        prim_index=(int(rng.integers(0, 1 << 31)), int(rng.integers(0, 1 << 31))),
        geometry_index=int(rng.integers(0, 1 << 24)),
        triangle_id=int(rng.integers(0, 1 << 16)) if rng.random() < 0.3 else None,
    )
    return node_dwords(raw)


def _random_node(rng):
    return [int(v) for v in rng.integers(0, 1 << 32, 32, dtype=np.uint64)]


def stimulus(rng, count, **params):
    """Random instructions: ~55% BVH8 box nodes, ~10% triangle pairs, ~10% instance nodes,
    ~5% other types / garbage, ~20% dual form."""
    n_tri = count // 10
    tri_txs = _triangle_txs(rng, n_tri) if n_tri else []
    txs = []
    for _ in range(count - len(tri_txs)):
        ray, o, d = _ray(rng)
        desc = _desc(rng)
        pflags = 0 if rng.random() < 0.6 else int(rng.integers(0, 1 << 10))
        if rng.random() < 0.78:
            roll = rng.random()
            if roll < 0.14:
                ptr = (int(rng.integers(0, 1 << 24)) << 4) | 6
                node = _instance_node(rng, o, d)
            elif roll < 0.92:
                ptr = (int(rng.integers(0, 1 << 24)) << 4) | 5
                node = _bvh8_node(rng, o, d) if rng.random() < 0.95 else _random_node(rng)
            else:
                ptr = (int(rng.integers(0, 1 << 24)) << 4) | int(rng.integers(0, 16))
                node = _random_node(rng)
            ptrs, nodes = [ptr, int(rng.integers(0, 1 << 32))], [node, _random_node(rng)]
            dual = 0
        else:
            ptrs, nodes = [], []
            for _k in range(2):
                roll = rng.random()
                t = (
                    5
                    if roll < 0.4
                    else 4
                    if roll < 0.75
                    else int(rng.integers(0, 2))
                    if roll < 0.92
                    else int(rng.choice([2, 3, 6, 7]))
                )
                ptrs.append((int(rng.integers(0, 1 << 26)) << 3) | t)
                if t in (4, 5):
                    nodes.append(_legacy_node(rng, o, d, t == 4))
                elif t in (0, 1) and rng.random() < 0.85:
                    nodes.append(_legacy_triangles(rng, o, d))
                else:
                    nodes.append(_random_node(rng))
            dual = 1
        txs.append(
            {
                "dual": dual,
                "ray": ray,
                "node_ptr": ptrs,
                "node": nodes,
                "pointer_flags": pflags,
                "desc": desc,
            }
        )
    # spread the triangle instructions through the run
    for _k, tx in enumerate(tri_txs):
        txs.insert(int(rng.integers(0, len(txs) + 1)), tx)
    return txs


class _Model(IntersectModel):
    def batch(self, txs):
        return [self(tx) for tx in txs]


def _build(engines, boxes_per_engine, ftz, triangles, transforms, fp):
    from gpurtl.hdl.ray_accel.ray_accel import RayAccel

    return RayAccel(
        engines=engines,
        boxes_per_engine=boxes_per_engine,
        ftz=ftz,
        triangles=triangles,
        transforms=transforms,
        fp=fp,
    )


def _golden(engines, boxes_per_engine, ftz, triangles, transforms, fp):
    from gpurtl.hdl.ray_accel.ray_accel import build_paths

    return _Model(ftz=ftz, paths=build_paths(triangles, transforms))


def _validate(engines, boxes_per_engine, ftz, triangles, transforms, fp):
    if engines * boxes_per_engine not in (1, 2, 4, 8):
        raise ValueError(
            "`engines * boxes_per_engine` must be 1, 2, 4 or 8 (8 = one BVH8 node "
            "per cycle; fewer testers take 8 / (engines * boxes_per_engine) cycles)"
        )


def _defaults(**params):
    """What a user's instruction may leave out: an unbounded ray seen by every instance mask,
    the single-node form, no pointer flags and the descriptor Mesa programs."""
    return {
        "dual": 0,
        "node_ptr": [0x15, 0],
        "pointer_flags": 0,
        "desc": default_desc(),
        "node": [[0] * 32, [0] * 32],
        "ray": {"extent": f32_bits(float("inf")), "instance_mask": 0xFF},
    }


def _stimulus_words(rng, count, **params):
    """:func:`.ray_accel_words.stimulus_words` on this block's :func:`stimulus`."""
    return ray_accel_words.stimulus_words(stimulus, rng, count, **params)


def ray_notes(**_):
    """The field notes of the ray blocks (:attr:`gpurtl.sim.core.registry.Block.notes`)."""
    return FIELD_NOTES


register(
    Block(
        name="ray_accel",
        doc="RDNA 4 ray accelerator: BVH8 / dual BVH4 box-node intersect instruction -> 10 dwords",
        kind="pipeline",
        build=_build,
        golden=_golden,
        layouts=lambda **params: (INSTR_LAYOUT, OUT_LAYOUT),
        stimulus=stimulus,
        params=(
            Param("engines", 2, "intersection engines", choices=(1, 2)),
            Param("boxes_per_engine", 4, "box tests per engine per cycle", choices=(1, 2, 4, 8)),
            Param("ftz", False, "flush subnormals in the box-path ray arithmetic"),
            Param("triangles", True, "include the triangle-pair and legacy triangle paths"),
            Param("transforms", True, "include the OBB and instance ray transforms"),
            Param(
                "fp",
                "fpga",
                "FP32 core depths: fpga (deep) or shallow (one stage per core)",
                choices=tuple(FP_PRESETS),
            ),
        ),
        defaults=_defaults,
        validate=_validate,
        notes=ray_notes,
        check_count=200,
        small={"engines": 1, "boxes_per_engine": 1, "triangles": False, "transforms": False},
        stimulus_words=_stimulus_words,
        golden_words=golden_words,
    )
)


# --- ray_sort: the sort unit alone -------------------------------------------------------------


def _sort_stimulus(rng, count, ftz, fp="fpga"):
    from gpurtl.golden import fp32

    pool_keys = [f32_bits(float(v)) for v in np.arange(-4, 5) * 0.5] + [
        fp32.CANONICAL_NAN,
        0x80000000,
        0x7F800000,
        0xFF800000,
        0x00000001,
        0x80000001,
    ]
    txs = []
    for _ in range(count):
        slots = []
        for _k in range(8):
            ptr = (
                INVALID_NODE
                if rng.random() < 0.3
                else (int(rng.integers(0, 1 << 24)) << 4) | int(rng.integers(0, 16))
            )
            key = (
                pool_keys[int(rng.integers(0, len(pool_keys)))]
                if rng.random() < 0.6
                else f32_bits(float(np.float32(rng.normal() * 100)))
            )
            slots.append({"ptr": ptr, "key": key})
        txs.append(
            {
                "slots": slots,
                "enable": int(rng.random() < 0.85),
                "wide": int(rng.integers(0, 2)),
                "stf": int(rng.integers(0, 2)),
            }
        )
    return txs


class _SortModel:
    def __init__(self, ftz):
        self.ftz = ftz

    def __call__(self, tx):
        from gpurtl.golden.ray_accel.scalar import sort

        ptrs = [s["ptr"] for s in tx["slots"]]
        if tx["enable"]:
            ptrs = sort.sort_slots(
                ptrs,
                [s["key"] for s in tx["slots"]],
                tx["stf"],
                wide=bool(tx["wide"]),
                ftz=self.ftz,
            )
        return {"ptrs": ptrs}


def _sort_layouts(ftz, fp="fpga"):
    from gpurtl.hdl.ray_accel.sort_unit import SORT_IN_LAYOUT, SORT_OUT_LAYOUT

    return SORT_IN_LAYOUT, SORT_OUT_LAYOUT


# --- the top level's components, each alone (stimulus derived from real instructions) -----------


_COMPONENT_PARAMS = {
    "triangles": Param("triangles", True, "the build has the triangle paths"),
    "transforms": Param("transforms", True, "the build has the OBB and instance transforms"),
    "ftz": Param("ftz", False, "flush subnormals in the ray arithmetic"),
    "fp": Param(
        "fp",
        "fpga",
        "FP32 core depths: fpga (deep) or shallow (one stage per core)",
        choices=tuple(FP_PRESETS),
    ),
}


class _Func:
    """A golden model object from a function of one transaction."""

    def __init__(self, func, **kwargs):
        self._func, self._kwargs = func, kwargs

    def __call__(self, tx):
        return self._func(tx, **self._kwargs)

    def batch(self, txs):
        return [self(tx) for tx in txs]


def _imported(path):
    """The object ``module:name`` names (imported when a block is first built or checked, so
    that listing the registry loads no RTL)."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _golden_function(path, *names, model=_Func):
    """A block's ``golden(**params)``: ``model`` around the golden function ``path`` of one
    transaction, given the build parameters ``names``."""

    def golden(**params):
        return model(_imported(path), **{name: params[name] for name in names})

    return golden


def _pipe(path, *names, stages=None):
    """A block's ``build(**params)``: the stream component ``path`` built with the parameters
    ``names`` and, with ``stages``, the FP32 core depths of preset ``fp``."""

    def build(**params):
        depths = stages(params["fp"]) if stages else {}
        return _imported(path)(**{name: params[name] for name in names}, **depths)

    return build


def _component(name, doc, *, params, build, golden, layouts, stimulus, check_count, **options):
    """Register one component of the ray accelerator as a pipeline block: ``params`` are keys of
    :data:`_COMPONENT_PARAMS` or :class:`~gpurtl.sim.core.registry.Param` objects."""
    register(
        Block(
            name=name,
            doc=doc,
            kind="pipeline",
            build=build,
            golden=golden,
            layouts=layouts,
            stimulus=stimulus,
            params=tuple(_COMPONENT_PARAMS.get(p, p) if isinstance(p, str) else p for p in params),
            check_count=check_count,
            **{"notes": ray_notes} | options,
        )
    )


_component(
    "ray_sort",
    "ray accelerator sort unit: 19-comparator 8-wide network (class key, then FP key)",
    params=(
        Param("ftz", False, "subnormal keys compare as zero"),
        Param(
            "fp",
            "fpga",
            "preset: fpga (compare and swap in two cycles per stage) or shallow (one)",
            choices=tuple(FP_PRESETS),
        ),
    ),
    build=_pipe("gpurtl.hdl.ray_accel.sort_unit:SortPipe", "ftz", stages=sort_stages),
    golden=lambda ftz, fp: _SortModel(ftz),
    layouts=_sort_layouts,
    stimulus=_sort_stimulus,
    check_count=2000,
)


def _decoded(rng, count, triangles=True, transforms=True):
    from gpurtl.golden.ray_accel.scalar.decode import decode

    return [decode(tx, triangles=triangles, transforms=transforms) for tx in stimulus(rng, count)]


# ray_decode -----------------------------------------------------------------------------------


def _decode_build(triangles, transforms):
    from gpurtl.hdl.pipe import EnableCoreStream
    from gpurtl.hdl.ray_accel.node_decode import NodeDecode

    core = NodeDecode(triangles=triangles, transforms=transforms)
    return EnableCoreStream(core, INSTR_LAYOUT, core.o.shape())


def _decode_layouts(triangles, transforms):
    from gpurtl.hdl.ray_accel.node_decode import decoded_layout

    return INSTR_LAYOUT, decoded_layout(triangles=triangles, transforms=transforms)


_component(
    "ray_decode",
    "ray accelerator entry stage: an instruction's node bytes decoded once",
    params=("triangles", "transforms"),
    build=_decode_build,
    golden=_golden_function(
        "gpurtl.golden.ray_accel.scalar.decode:decode", "triangles", "transforms"
    ),
    layouts=_decode_layouts,
    stimulus=lambda rng, count, **params: stimulus(rng, count),
    check_count=300,
    defaults=_defaults,
)


# ray_setup ------------------------------------------------------------------------------------


def _setup_stimulus(rng, count, transforms, ftz, fp):
    out = []
    for d in _decoded(rng, count, transforms=transforms):
        tx = {"origin": d["ray"]["origin"], "dir": d["ray"]["dir"]}
        if transforms:
            tx.update(obb_index=d["obb_index"], transform=d["transform"])
            if rng.random() < 0.3:  # any index, also 104..126
                tx["obb_index"] = int(rng.integers(0, 128))
        out.append(tx)
    return out


def _setup_layouts(transforms, ftz, fp):
    from gpurtl.hdl.ray_accel.ray_setup import SETUP_OUT_LAYOUT, setup_in_layout

    return setup_in_layout(transforms), SETUP_OUT_LAYOUT


_component(
    "ray_setup",
    "ray accelerator ray setup: OBB / instance transform, then rcp(dir)",
    params=("transforms", "ftz", "fp"),
    build=_pipe(
        "gpurtl.hdl.ray_accel.ray_setup:RaySetupPipe", "transforms", "ftz", stages=ray_setup_stages
    ),
    golden=_golden_function("gpurtl.golden.ray_accel.scalar.setup:ray_setup", "transforms", "ftz"),
    layouts=_setup_layouts,
    stimulus=_setup_stimulus,
    check_count=300,
)


# ray_box_engine -------------------------------------------------------------------------------


def _engine_stimulus(rng, count, boxes, ftz, fp):
    from gpurtl.golden.ray_accel.scalar.setup import ray_setup

    out = []
    for d in _decoded(rng, count):
        setup = ray_setup(
            {
                "origin": d["ray"]["origin"],
                "dir": d["ray"]["dir"],
                "obb_index": d["obb_index"],
                "transform": d["transform"],
            },
            ftz=ftz,
        )
        first = int(rng.integers(0, 8 - boxes + 1))
        out.append(
            {
                "box": {
                    "base": d["base"],
                    "boxes": d["planes"][first : first + boxes],
                    "ray": {
                        "origin": setup["ray"]["origin"],
                        "extent": d["ray"]["extent"],
                        "box_grow": d["control"]["box_grow"],
                        "heuristic": d["control"]["heuristic"],
                    },
                },
                "inv_dir": setup["inv_dir"],
            }
        )
    return out


class _EngineModel(_Func):
    def __call__(self, tx):
        return self._func(dict(tx["box"], inv_dir=tx["inv_dir"]), **self._kwargs)


def _engine_layouts(boxes, ftz, fp):
    from amaranth.lib import data

    from gpurtl.hdl.ray_accel.box_engine import engine_in_layout, engine_out_layout
    from gpurtl.hdl.ray_accel.ray_setup import SETUP_OUT_LAYOUT

    return (
        data.StructLayout(
            {"box": engine_in_layout(boxes), "inv_dir": SETUP_OUT_LAYOUT["inv_dir"].shape}
        ),
        engine_out_layout(boxes),
    )


_component(
    "ray_box_engine",
    "ray accelerator box engine: dequantized planes, slab test, hit and sort key",
    params=(Param("boxes", 1, "box tests per cycle", choices=(1, 2, 4, 8)), "ftz", "fp"),
    build=_pipe(
        "gpurtl.hdl.ray_accel.box_engine:BoxEnginePipe", "boxes", "ftz", stages=box_engine_stages
    ),
    golden=_golden_function(
        "gpurtl.golden.ray_accel.scalar.box_test:box_engine", "ftz", model=_EngineModel
    ),
    layouts=_engine_layouts,
    stimulus=_engine_stimulus,
    check_count=300,
)


# ray_dedup ------------------------------------------------------------------------------------


def _dedup_stimulus(rng, count):
    txs = []
    for _ in range(count):
        pool = [INVALID_NODE] + [
            (int(rng.integers(0, 1 << 24)) << 4) | int(rng.integers(0, 16)) for _ in range(3)
        ]
        slots = [
            {
                "ptr": pool[int(rng.integers(0, len(pool)))],
                "hit": int(rng.random() < 0.7),
                "key": int(rng.integers(0, 1 << 32)),
            }
            for _ in range(8)
        ]
        txs.append({"slots": slots, "dedup": int(rng.random() < 0.8)})
    return txs


def _dedup_layouts():
    from gpurtl.hdl.ray_accel.dedup import DEDUP_IN_LAYOUT, DEDUP_OUT_LAYOUT

    return DEDUP_IN_LAYOUT, DEDUP_OUT_LAYOUT


_component(
    "ray_dedup",
    "ray accelerator hit select and child-reuse de-duplication of the 8 box slots",
    params=(),
    build=_pipe("gpurtl.hdl.ray_accel.dedup:DedupPipe"),
    golden=_golden_function("gpurtl.golden.ray_accel.scalar.box_path:dedup_slots"),
    layouts=_dedup_layouts,
    stimulus=_dedup_stimulus,
    check_count=2000,
)


# ray_result -----------------------------------------------------------------------------------


def _result_stimulus(rng, count, triangles, transforms):
    out = []
    for d in _decoded(rng, count, triangles=triangles, transforms=transforms):
        ptrs = [p if rng.random() < 0.6 else INVALID_NODE for p in d["ptrs"]]
        tx = {
            "ptrs": ptrs,
            "control": d["control"],
            "ray": {"origin": d["ray"]["origin"], "dir": d["ray"]["dir"]},
        }
        if transforms:
            tx["instance"] = d["instance"]
            tx["instance_ray"] = {
                "origin": [int(v) for v in rng.integers(0, 1 << 32, 3)],
                "dir": [int(v) for v in rng.integers(0, 1 << 32, 3)],
            }
        if triangles:
            tx["triangle"] = {
                "result": [int(v) for v in rng.integers(0, 1 << 32, 10)],
                "error": int(rng.random() < 0.2),
            }
            tx["legacy"] = {
                "result": [[int(v) for v in rng.integers(0, 1 << 32, 4)] for _ in range(2)],
                "error": [int(rng.random() < 0.2) for _ in range(2)],
            }
            tx["geometry_index"] = d["geometry_index"]
        out.append(tx)
    return out


def _result_layouts(triangles, transforms):
    from gpurtl.hdl.ray_accel.result_format import format_in_layout

    return format_in_layout(triangles=triangles, transforms=transforms), OUT_LAYOUT


_component(
    "ray_result",
    "ray accelerator result format: 10 dwords, returned ray and status of every path",
    params=("triangles", "transforms"),
    build=_pipe("gpurtl.hdl.ray_accel.result_format:ResultFormatPipe", "triangles", "transforms"),
    golden=_golden_function(
        "gpurtl.golden.ray_accel.scalar.result:format_result", "triangles", "transforms"
    ),
    layouts=_result_layouts,
    stimulus=_result_stimulus,
    check_count=500,
)
