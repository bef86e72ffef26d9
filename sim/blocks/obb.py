"""Registry entries of the ray transform blocks: ``obb_transform`` and ``instance_transform``."""

import numpy as np

from gpurtl.facts.fp32 import f32_bits
from gpurtl.golden.ray_accel.scalar import instance as instance_model
from gpurtl.golden.ray_accel.scalar import obb as obb_model

from ..core.registry import Block, Param, register

_FMA = Param(
    "fma_stages", 2, "register stages of each FP32 FMA unit (latency = 3x this)", range=(1, 6)
)

# Corner-case FP32 patterns: zeros, ones, subnormals, the largest finite, infinities, NaNs.
_SPECIAL = np.array(
    [
        0x00000000,
        0x80000000,
        0x3F800000,
        0xBF800000,
        0x00000001,
        0x807FFFFF,
        0x7F7FFFFF,
        0xFF7FFFFF,
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0x7F800001,
        0xFFC12345,
        0x00800000,
        0x3EAAAAAB,
        0x4B000000,
    ],
    dtype=np.uint32,
)


def random_f32(rng, shape):
    """FP32 patterns for stimuli: mostly moderate values, plus specials and any pattern."""
    n = int(np.prod(shape))
    roll = rng.random(n)
    moderate = np.array(
        [f32_bits(v) for v in rng.normal(0, 20, n).astype(np.float32)], dtype=np.uint32
    )
    anybits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    special = _SPECIAL[rng.integers(0, len(_SPECIAL), n)]
    wide = (
        (rng.integers(0, 2, n, dtype=np.uint32) << 31)
        | (rng.integers(90, 165, n, dtype=np.uint32) << 23)
        | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    )
    bits = np.where(
        roll < 0.55, moderate, np.where(roll < 0.75, wide, np.where(roll < 0.9, special, anybits))
    )
    return bits.reshape(shape)


# --- obb_transform --------------------------------------------------------------------------------


def _obb_layouts(fma_stages, lanes):
    from gpurtl.hdl.ray_accel.obb_transform import core_in_layout, core_out_layout

    return core_in_layout(lanes), core_out_layout(lanes)


def _obb_indices(rng, count):
    """Every index 0..103 and 0x7F at least once (in order first), then random 7-bit values with
    most weight on the defined ones."""
    fixed = list(range(obb_model.OBB_COUNT)) + [obb_model.NO_ROTATION]
    rest = np.where(
        rng.random(count) < 0.85,
        rng.integers(0, 104, count),
        np.where(rng.random(count) < 0.6, 0x7F, rng.integers(104, 128, count)),
    )
    return (fixed + [int(v) for v in rest])[:count]


def _obb_stimulus(rng, count, fma_stages, lanes):
    idx = [_obb_indices(rng, count) for _ in range(lanes)]
    if lanes == 2:
        idx[1] = [int(v) for v in rng.permutation(idx[1])]
    o = random_f32(rng, (count, 3))
    d = random_f32(rng, (count, 3))
    txs = []
    for k in range(count):
        index = idx[0][k] if lanes == 1 else [idx[0][k], idx[1][k]]
        txs.append(
            {"index": index, "origin": [int(v) for v in o[k]], "dir": [int(v) for v in d[k]]}
        )
    return txs


class ObbTransformModel:
    """Golden model of the ``obb_transform`` block (vectorized ``batch``)."""

    def __init__(self, lanes=1):
        self.lanes = lanes

    def __call__(self, tx):
        return self.batch([tx])[0]

    def batch(self, txs):
        o = np.array([tx["origin"] for tx in txs], dtype=np.uint32).reshape(-1, 3)
        d = np.array([tx["dir"] for tx in txs], dtype=np.uint32).reshape(-1, 3)
        lanes = []
        for lane in range(self.lanes):
            idx = np.array([tx["index"] if self.lanes == 1 else tx["index"][lane] for tx in txs])
            lanes.append(obb_model.obb_transform_ray(idx, o, d))
        out = []
        for k in range(len(txs)):
            rays = [
                {
                    "origin": [int(v) for v in lo[k]],
                    "dir": [int(v) for v in ld[k]],
                    "bad_index": int(lb[k]),
                }
                for lo, ld, lb in lanes
            ]
            out.append(rays[0] if self.lanes == 1 else {"lane": rays})
        return out


def _obb_build(fma_stages, lanes):
    from gpurtl.hdl.ray_accel.obb_transform import OBBTransformPipe

    return OBBTransformPipe(fma_stages=fma_stages, lanes=lanes)


register(
    Block(
        name="obb_transform",
        doc="RDNA 4 OBB ray transform: 104-entry two-level rotation ROM, o'=M*o, d'=M*d on FP32 FMAs",
        kind="pipeline",
        params=(
            _FMA,
            Param("lanes", 1, "transforms per cycle (2 = dual BVH4x2 form)", choices=(1, 2)),
        ),
        build=_obb_build,
        golden=lambda fma_stages, lanes: ObbTransformModel(lanes),
        layouts=_obb_layouts,
        stimulus=_obb_stimulus,
        check_count=500,
    )
)


# --- instance_transform ---------------------------------------------------------------------------


def _rigid_rows(rng):
    """A world-to-object 3x4 matrix of a random rotation (and scale) plus translation."""
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    r = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    r *= rng.choice([1.0, 0.5, 3.0])
    t = rng.normal(0, 50, 3)
    return np.hstack([r, t[:, None]]).astype(np.float32).view(np.uint32)


def _instance_stimulus(rng, count, fma_stages):
    txs = []
    for _ in range(count):
        rows = _rigid_rows(rng) if rng.random() < 0.7 else random_f32(rng, (3, 4))
        base = int(rng.integers(0, 1 << 51)) << 3 | int(rng.integers(0, 8))
        base |= int(rng.integers(0, 1 << 10)) << 54
        mask = (
            0xFF
            if rng.random() < 0.7
            else int(rng.choice([0x00, 0x01, 0x80, int(rng.integers(0, 256))]))
        )
        node = instance_model.encode_instance(
            [[int(v) for v in row] for row in rows],
            base,
            user_data=int(rng.integers(0, 1 << 24)),
            mask=mask,
            parent=int(rng.integers(0, 1 << 32)),
        )
        node[16:32] = [int(v) for v in rng.integers(0, 1 << 32, 16, dtype=np.uint64)]
        o, d = random_f32(rng, (2, 3))
        flags = (
            int(rng.integers(0, 1 << 10))
            if rng.random() < 0.25
            else int(rng.choice([0, 0, 0, 1 << 8, 1 << 9, 1, 2, 3, 0xF0]))
        )
        txs.append(
            {
                "node": node,
                "ray": {
                    "origin": [int(v) for v in o],
                    "dir": [int(v) for v in d],
                    "extent": int(random_f32(rng, (1,))[0]),
                    "instance_mask": 0xFF if rng.random() < 0.8 else int(rng.integers(0, 256)),
                },
                "pointer_flags": flags,
                "pointer_flags_en": int(rng.random() < 0.85),
            }
        )
    return txs


class InstanceTransformModel:
    def __call__(self, tx):
        out = instance_model.instance_transform(
            tx["node"], tx["ray"], tx["pointer_flags"], {"pointer_flags_en": tx["pointer_flags_en"]}
        )
        return out


def _instance_layouts(fma_stages):
    from gpurtl.hdl.ray_accel.instance_transform import INSTANCE_IN_LAYOUT, INSTANCE_OUT_LAYOUT

    return INSTANCE_IN_LAYOUT, INSTANCE_OUT_LAYOUT


def _instance_build(fma_stages):
    from gpurtl.hdl.ray_accel.instance_transform import InstancePipe

    return InstancePipe(fma_stages=fma_stages)


register(
    Block(
        name="instance_transform",
        doc="RDNA 4 instance node: mask/type cull, BLAS pointer flag merge, user data, 3x4 ray transform",
        kind="pipeline",
        params=(_FMA,),
        build=_instance_build,
        golden=lambda fma_stages: InstanceTransformModel(),
        layouts=_instance_layouts,
        stimulus=_instance_stimulus,
        check_count=300,
    )
)
