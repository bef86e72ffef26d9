"""Registry entries of the STOC family: `stoc` (sub-triangle opacity classification) and
`omm_index` (barycentrics -> micro-triangle index)."""

import numpy as np

from gpurtl.facts.stoc import (
    omm_index_in_layout,
    omm_index_out_layout,
    stoc_in_layout,
    stoc_out_layout,
)
from gpurtl.golden.stoc.classify import classify_arrays
from gpurtl.golden.stoc.index import bary_to_index

from ..core.registry import Block, Param, register

__all__ = ["random_barycentrics"]

_FRAC = Param("frac_bits", 24, "fraction bits of the fixed-point barycentrics", range=(12, 24))
_SPECIALS = [
    0x00000000,
    0x80000000,
    0x3F800000,
    0x3F7FFFFF,
    0x3F800001,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0xFFC00000,
    0x00000001,
    0x007FFFFF,
    0xBF000000,
    0x40000000,
    0x33800000,
]


def _f32(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)


def random_barycentrics(rng, count):
    """FP32 (u, v) pairs: interior points, exact grid lines of every level, the outer edge,
    vertices, points one ulp off the lines, out-of-range values, NaN/inf/subnormal patterns."""
    kind = rng.integers(0, 8, count)
    level = rng.integers(0, 13, count)
    n = (1 << level).astype(np.float64)
    a = rng.random(count)
    b = rng.random(count) * (1 - a)
    ku = rng.integers(0, 1 << 12, count) % (n.astype(np.int64) + 1) / n
    kv = rng.integers(0, 1 << 12, count) % (n.astype(np.int64) + 1) / n
    kv = np.minimum(kv, 1 - ku)
    u = np.select([kind == 0, kind == 1, kind == 2, kind == 3, kind == 4], [a, ku, b, a, ku], a)
    v = np.select(
        [kind == 0, kind == 1, kind == 2, kind == 3, kind == 4], [b, b * (1 - ku), ku, 1 - a, kv], b
    )
    ub, vb = _f32(u), _f32(v)
    nudge = kind == 5
    ub = np.where(nudge, _f32(ku) + rng.integers(-1, 2, count), ub)
    vb = np.where(nudge, _f32(kv) + rng.integers(-1, 2, count), vb)
    wild = kind == 6
    ub = np.where(wild, rng.choice(_SPECIALS, count), ub)
    vb = np.where(wild & (rng.random(count) < 0.5), rng.integers(0, 1 << 32, count), vb)
    beyond = kind == 7
    ub = np.where(beyond, _f32(a * 1.2), ub)
    vb = np.where(beyond, _f32(rng.random(count) * 1.1), vb)
    return (ub & 0xFFFFFFFF).tolist(), (vb & 0xFFFFFFFF).tolist()


def _stoc_stimulus(rng, count, **params):
    us, vs = random_barycentrics(rng, count)
    out = []
    for k in range(count):

        def flags_pick(bit):
            return bit if rng.random() < 0.12 else 0

        level = (
            int(rng.integers(0, 13))
            if rng.random() < 0.85
            else int(rng.choice([13, 15, 255, 0xFFFF, int(rng.integers(0, 1 << 16))]))
        )
        r = rng.random()
        if r < 0.3:
            omm_index = int(rng.integers(-5, 0))
        elif r < 0.35:
            omm_index = int(rng.integers(-(1 << 31), -5))
        else:
            omm_index = int(rng.integers(0, 1 << 31))
        fmt = int(rng.choice([1, 2])) if rng.random() < 0.9 else int(rng.integers(0, 1 << 16))
        out.append(
            {
                "source": int(rng.integers(0, 4)),
                "tri": int(rng.integers(0, 2)),
                "u": us[k],
                "v": vs[k],
                "dw3": int(rng.integers(0, 1 << 32)),
                "opaque": int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(0, 2)),
                "transp": int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(0, 2)),
                "swstoc": int(rng.integers(0, 2)),
                "level": level,
                "addr": int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(0, 2)),
                "omm_index": omm_index,
                "omm_format": fmt,
                "omm_word": int(rng.integers(0, 1 << 32)),
                "geom_opaque": int(rng.integers(0, 2)),
                "ray_flags": flags_pick(0x400)
                | (int(rng.integers(0, 1 << 16)) & ~0x400 if rng.random() < 0.3 else 0),
                "instance_flags": flags_pick(0x10)
                | flags_pick(0x20)
                | (int(rng.integers(0, 256)) & ~0x30 if rng.random() < 0.3 else 0),
                "internal_flags": flags_pick(0x8)
                | (int(rng.integers(0, 256)) & ~0x8 if rng.random() < 0.3 else 0),
            }
        )
    return out


_WIDE = ("addr", "opaque", "transp")


class _STOCGolden:
    def __init__(self, **params):
        self.params = params

    def batch(self, inputs):
        if not inputs:
            return []
        arrays = {
            name: np.array(
                [int(tx[name]) for tx in inputs], dtype=np.uint64 if name in _WIDE else np.int64
            )
            for name in inputs[0]
        }
        out = classify_arrays(arrays, **self.params)
        return [{name: int(values[k]) for name, values in out.items()} for k in range(len(inputs))]

    def __call__(self, tx):
        return self.batch([tx])[0]


def _stoc_build(**params):
    from gpurtl.hdl.stoc.stoc import STOCUnit

    return STOCUnit(**params)


#: What the values of the STOC unit's integer selector fields mean (``Block.notes``); the
#: opacity-micromap states and formats are VK_EXT_opacity_micromap's.
_STOC_NOTES = {
    "in": {"omm_format": "1 2-state, 2 4-state (VkOpacityMicromapFormatEXT)"},
    "out": {
        "state": "the 4-state value found: 0 transparent, 1 opaque, 2 unknown transparent, "
        "3 unknown opaque (0 also when no micromap is used)"
    },
}


register(
    Block(
        name="stoc",
        notes=lambda **_: _STOC_NOTES,
        doc="Xe3 STOC1/STOC3 and opacity-micromap classification of a candidate hit (any-hit culling)",
        kind="pipeline",
        build=_stoc_build,
        golden=lambda **params: _STOCGolden(**params),
        layouts=lambda **params: (stoc_in_layout, stoc_out_layout),
        stimulus=_stoc_stimulus,
        params=(
            _FRAC,
            Param(
                "plane_order",
                "omm",
                "STOC plane bit order (not published)",
                choices=("omm", "corners"),
            ),
            Param(
                "both_planes",
                "uo",
                "state of opaque+transparent bits both set (not published)",
                choices=("uo", "ut", "opaque", "transparent"),
            ),
        ),
        defaults=lambda **params: {
            "source": 0,
            "tri": 0,
            "dw3": 0,
            "opaque": 0,
            "transp": 0,
            "swstoc": 0,
            "level": 0,
            "addr": 0,
            "omm_index": 0,
            "omm_format": 2,
            "omm_word": 0,
            "geom_opaque": 0,
            "ray_flags": 0,
            "instance_flags": 0,
            "internal_flags": 0,
        },
        check_count=1000,
    )
)


def _index_stimulus(rng, count, **params):
    us, vs = random_barycentrics(rng, count)
    levels = rng.integers(0, 13, count)
    levels = np.where(rng.random(count) < 0.05, rng.integers(13, 16, count), levels)
    return [{"u": u, "v": v, "level": int(lv)} for u, v, lv in zip(us, vs, levels)]


class _IndexGolden:
    def __init__(self, frac_bits=24):
        self.frac_bits = frac_bits

    def batch(self, inputs):
        u = np.array([tx["u"] for tx in inputs], dtype=np.int64)
        v = np.array([tx["v"] for tx in inputs], dtype=np.int64)
        levels = np.array([tx["level"] for tx in inputs], dtype=np.int64)
        out = np.zeros(len(inputs), dtype=np.int64)
        for level in range(13):
            sel = levels == level
            if sel.any():
                out[sel] = bary_to_index(u[sel], v[sel], level, self.frac_bits)
        return [{"index": int(i), "error": int(lv > 12)} for i, lv in zip(out, levels)]

    def __call__(self, tx):
        return self.batch([tx])[0]


def _index_build(**params):
    from gpurtl.hdl.stoc.omm_index import OMMIndex

    return OMMIndex(**params)


register(
    Block(
        name="omm_index",
        doc="FP32 barycentrics -> opacity-micromap micro-triangle index at level 0..12 (Vulkan order)",
        kind="pipeline",
        build=_index_build,
        golden=lambda **params: _IndexGolden(**params),
        layouts=lambda **params: (omm_index_in_layout, omm_index_out_layout),
        stimulus=_index_stimulus,
        params=(_FRAC,),
        defaults=lambda **params: {"level": 12},
        check_count=1000,
    )
)
