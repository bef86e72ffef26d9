"""Registry entries of the FP32 units: ``fp32_add`` (with a ``sub`` field), ``fp32_mul``,
``fp32_fma``, ``fp32_cmp``, ``fp32_minmax``, ``fp32_rcp``, ``fp32_div``, and the conversions
``fp32_f2i`` (float -> int32/uint32) and ``fp32_i2f`` (int32/uint32 -> float), each with a
``signed`` field (default 1).

Each is a :class:`gpurtl.hdl.fp32.stream.FPStreamUnit` (pipeline kind) with parameters ``stages``
and ``ftz``, checked against :mod:`gpurtl.golden.fp32`. The stimulus starts with the cross product
of the special values (:func:`gpurtl.golden.fp32.special_values`, both signs; a reduced triple
product for ``fp32_fma``) and continues with random vectors: random bit patterns, "nice" floats
(small integers and dyadic fractions), operand pairs with close exponents (cancellation and
ties), tiny exponents (subnormal operands and results) and, for ``fp32_fma``, addends close to
``-a*b``.

The conversions have their own stimulus (:func:`special_inputs` / :func:`random_inputs`): for
``fp32_f2i`` the special values plus the conversion boundaries (+-0.5, +-1.5, +-2**31,
2**31 - 128, 2**32, -2**31 - 256, every exponent field from 2**-7 to 2**33 with extreme
significands), for ``fp32_i2f`` the integers around every power of two (with the rounding ties
above 2**24), INT32_MIN, 0x7FFFFFFF, 0xFFFFFFFF; both crossed with ``signed`` = 0 and 1. Random
vectors: bit patterns, exponents near the integer range, small dyadic values and (for ``fp32_i2f``)
integers with a random leading-bit position and few low bits (ties).
"""

import numpy as np

from gpurtl.golden import fp32 as golden
from gpurtl.hdl.fp32.stream import UNITS, FPStreamUnit, unit_layouts

from ..core.registry import Block, Param, register

__all__ = [
    "special_inputs",
    "random_inputs",
    "stimulus",
    "FP32Model",
    "CONVERSIONS",
    "F2I_BOUNDARIES",
    "I2F_VALUES",
]

_DOCS = {
    "add": "FP32 add/subtract (RNE, subnormals, canonical NaN)",
    "mul": "FP32 multiply (RNE, subnormals, canonical NaN)",
    "fma": "FP32 fused multiply-add a*b+c, one rounding",
    "cmp": "FP32 quiet compare: lt, le, equal, unordered",
    "minmax": "FP32 min and max (NaN propagating, -0 < +0)",
    "rcp": "FP32 reciprocal 1/a, correctly rounded",
    "div": "FP32 divide a/b, correctly rounded",
    "f2i": "FP32 -> int32/uint32, toward zero, saturating, NaN -> 0 (invalid flag)",
    "i2f": "int32/uint32 -> FP32, round to nearest even",
}

CONVERSIONS = ("f2i", "i2f")

#: float -> int boundaries besides :func:`gpurtl.golden.fp32.special_values` (positive patterns;
#: both signs are used): 0.5, 1.5, 2**31 - 128, 2**31, 2**32 - 256, 2**32, 2**31 + 256, 2**23 + 1,
#: 2**24 - 1, 1 - ulp/2.
F2I_BOUNDARIES = (
    0x3F000000,
    0x3FC00000,
    0x4EFFFFFF,
    0x4F000000,
    0x4F7FFFFF,
    0x4F800000,
    0x4F000001,
    0x4B000001,
    0x4B7FFFFF,
    0x3F7FFFFF,
)

#: int -> float patterns besides the powers of two: INT32_MIN, -1, 0, 1, 2**24 + 1, 0x7FFFFFFF.
I2F_VALUES = (0x80000000, 0xFFFFFFFF, 0, 1, (1 << 24) + 1, 0x7FFFFFFF)


def _operands(unit):
    return [name for name in UNITS[unit][1] if name not in ("sub", "signed")]


def _f2i_specials():
    values = set(golden.special_values()) | set(F2I_BOUNDARIES)
    for field in range(120, 161):  # 2**-7 .. 2**33, extreme significands
        for frac in (0, 1, 0x400000, 0x7FFFFF):
            values.add(field << 23 | frac)
    values |= {v | 0x80000000 for v in values}
    return sorted(values)


def _i2f_specials():
    values = set(I2F_VALUES)
    for k in range(32):
        p = 1 << k
        values |= {p, p - 1, p + 1}
        if k >= 24:  # ties below, at and above the half ulp
            ulp = 1 << (k - 23)
            values |= {p + ulp // 2, p + 3 * ulp // 2, p + ulp // 2 + 1, p + ulp // 2 - 1}
    values = {v & 0xFFFFFFFF for v in values}
    values |= {-v & 0xFFFFFFFF for v in values}
    return sorted(values)


def special_inputs(unit):
    """Input arrays (dict name -> uint32 array) of the special-value cross product."""
    if unit in CONVERSIONS:  # every special value with signed = 0 and 1
        values = np.array(_f2i_specials() if unit == "f2i" else _i2f_specials(), dtype=np.uint32)
        return {
            "a": np.concatenate([values, values]),
            "signed": np.repeat(np.array([0, 1], dtype=np.uint32), values.size),
        }
    names = _operands(unit)
    values = np.array(golden.special_values(), dtype=np.uint32)
    if len(names) == 3:
        values = values[::3]  # 18 values -> 5832 triples
    grids = np.meshgrid(*([values] * len(names)), indexing="ij")
    arrays = {name: grid.ravel() for name, grid in zip(names, grids)}
    if unit == "add":  # every pair as add and as subtract
        size = arrays["a"].size
        arrays = {name: np.concatenate([v, v]) for name, v in arrays.items()}
        arrays["sub"] = np.repeat(np.array([0, 1], dtype=np.uint32), size)
    return arrays


def _bits(rng, n):
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


def _nice(rng, n):
    """Small integers and dyadic fractions (exact, tie-prone arithmetic)."""
    num = rng.integers(-64, 65, n).astype(np.float64)
    scale = 2.0 ** rng.integers(-8, 9, n)
    return (num * scale).astype(np.float32).view(np.uint32)


def _with_field(rng, n, field):
    return (_bits(rng, n) & np.uint32(0x807FFFFF)) | (field.astype(np.uint32) << np.uint32(23))


def _random_operand(rng, n, kind):
    if kind == 0:
        return _bits(rng, n)
    if kind == 1:
        return _nice(rng, n)
    if kind == 2:  # subnormal and tiny normals
        return _with_field(rng, n, rng.integers(0, 30, n))
    return _with_field(rng, n, rng.integers(96, 160, n))  # moderate exponents


def _random_conversion(unit, rng, n):
    kind = rng.integers(0, 4, n)
    if unit == "f2i":
        choice = np.stack(
            [
                _bits(rng, n),
                _with_field(rng, n, rng.integers(118, 163, n)),  # around the integer range
                _nice(rng, n),
                # integers and near-integers as floats (ties of truncation, saturation edges)
                (
                    rng.integers(-(1 << 33), 1 << 33, n).astype(np.float64)
                    * 2.0 ** rng.integers(-24, 1, n)
                )
                .astype(np.float32)
                .view(np.uint32),
            ]
        )
    else:
        # a random leading-bit position, then all bits below it random or only a few
        top = rng.integers(0, 32, n).astype(np.uint64)
        low = _bits(rng, n).astype(np.uint64) & ((np.uint64(1) << top) - np.uint64(1))
        few = low & (np.uint64(0xFF) | (np.uint64(0xFF) << (top // np.uint64(2))))
        lead = np.uint64(1) << top
        choice = np.stack(
            [
                _bits(rng, n),
                (lead | low).astype(np.uint32),
                (lead | few).astype(np.uint32),
                (rng.integers(-64, 65, n) & 0xFFFFFFFF).astype(np.uint32),
            ]
        )
    a = choice[kind, np.arange(n)].astype(np.uint32)
    if unit == "i2f":  # negate a third of them
        neg = rng.random(n) < 0.33
        a = np.where(neg, (-a.astype(np.int64)) & 0xFFFFFFFF, a).astype(np.uint32)
    return {"a": a, "signed": rng.integers(0, 2, n).astype(np.uint32)}


def random_inputs(unit, rng, n):
    """``n`` random input vectors (dict name -> uint32 array) for ``unit``."""
    if unit in CONVERSIONS:
        return _random_conversion(unit, rng, n)
    names = _operands(unit)
    kind = rng.integers(0, 4, n)
    arrays = {}
    for name in names:
        choice = np.stack([_random_operand(rng, n, k) for k in range(4)])
        # mostly the same kind for all operands of one vector, sometimes mixed
        mixed = rng.random(n) < 0.25
        own = np.where(mixed, rng.integers(0, 4, n), kind)
        arrays[name] = choice[own, np.arange(n)]
    if len(names) >= 2:
        # close exponents: cancellation in add/sub, ties and carries
        close = rng.random(n) < 0.3
        a = arrays["a"]
        field = ((a >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
        field = np.clip(field + rng.integers(-2, 3, n), 0, 254)
        near = _with_field(rng, n, field)
        if unit == "add":  # also b == +-a +- few ulps
            tiny = (a.astype(np.int64) + rng.integers(-3, 4, n)) & 0xFFFFFFFF
            near = np.where(
                rng.random(n) < 0.5,
                near,
                tiny.astype(np.uint32) ^ (rng.integers(0, 2, n).astype(np.uint32) << 31),
            )
        arrays["b"] = np.where(close, near, arrays["b"]).astype(np.uint32)
    if unit == "fma":  # c close to -a*b: massive cancellation
        with np.errstate(all="ignore"):
            p = (arrays["a"].view(np.float32) * arrays["b"].view(np.float32)).view(np.uint32)
        near = ((p.astype(np.int64) + rng.integers(-2, 3, n)) & 0xFFFFFFFF).astype(np.uint32)
        near ^= np.uint32(0x80000000)
        arrays["c"] = np.where(rng.random(n) < 0.3, near, arrays["c"]).astype(np.uint32)
    if unit == "add":
        arrays["sub"] = rng.integers(0, 2, n).astype(np.uint32)
    return arrays


def _to_dicts(arrays):
    names = list(arrays)
    columns = [arrays[name].tolist() for name in names]
    return [dict(zip(names, row)) for row in zip(*columns)]


def stimulus(unit, rng, count):
    """The special cross product (all of it when ``count`` allows, else a random part of it
    making up half of ``count``), then random vectors up to ``count``."""
    special = special_inputs(unit)
    size = next(iter(special.values())).size
    if count < size:
        pick = np.sort(rng.choice(size, count // 2, replace=False))
        special = {name: v[pick] for name, v in special.items()}
        size = pick.size
    rest = random_inputs(unit, rng, count - size)
    arrays = {
        name: np.concatenate([special[name], rest[name]]).astype(np.uint32) for name in special
    }
    return _to_dicts(arrays)


class FP32Model:
    """Golden model of one stream unit: ``model(tx)`` and vectorised ``model.batch(txs)``."""

    def __init__(self, unit, ftz=False):
        self.unit, self.ftz = unit, ftz

    def __call__(self, tx):
        return self.batch([tx])[0]

    def batch(self, txs):
        if not txs:
            return []
        arrays = {
            name: np.array([tx[name] for tx in txs], dtype=np.uint32)
            for name in UNITS[self.unit][1]
        }
        ftz = self.ftz
        a = arrays["a"]
        if self.unit == "add":
            b = arrays["b"] ^ (arrays["sub"].astype(np.uint32) << np.uint32(31))
            out = {"z": golden.add(a, b, ftz=ftz)}
        elif self.unit == "mul":
            out = {"z": golden.mul(a, arrays["b"], ftz=ftz)}
        elif self.unit == "fma":
            out = {"z": golden.fma(a, arrays["b"], arrays["c"], ftz=ftz)}
        elif self.unit == "div":
            out = {"z": golden.div(a, arrays["b"], ftz=ftz)}
        elif self.unit == "rcp":
            out = {"z": golden.rcp(a, ftz=ftz)}
        elif self.unit == "f2i":
            z, invalid = golden.f2i(a, arrays["signed"], ftz=ftz)
            out = {"z": z, "invalid": invalid.astype(np.uint32)}
        elif self.unit == "i2f":
            out = {"z": golden.i2f(a, arrays["signed"], ftz=ftz)}
        elif self.unit == "cmp":
            b = arrays["b"]
            out = {
                "lt": golden.lt(a, b, ftz=ftz),
                "le": golden.le(a, b, ftz=ftz),
                "equal": golden.eq(a, b, ftz=ftz),
                "unordered": golden.unordered(a, b, ftz=ftz),
            }
            out = {name: v.astype(np.uint32) for name, v in out.items()}
        else:
            b = arrays["b"]
            out = {"min": golden.fmin(a, b, ftz=ftz), "max": golden.fmax(a, b, ftz=ftz)}
        return _to_dicts(out)


def _register(unit):
    core = UNITS[unit][0]
    special = next(iter(special_inputs(unit).values())).size

    def build(stages, ftz):
        return FPStreamUnit(unit, stages, ftz)

    def golden_model(stages, ftz):
        return FP32Model(unit, ftz)

    def layouts(stages, ftz):
        return unit_layouts(unit)

    def make_stimulus(rng, count, stages, ftz):
        return stimulus(unit, rng, count)

    defaults = (lambda stages, ftz: {"sub": 0}) if unit == "add" else None
    if unit in CONVERSIONS:
        defaults = lambda stages, ftz: {"signed": 1}  # noqa: E731
    register(
        Block(
            name=f"fp32_{unit}",
            doc=_DOCS[unit],
            kind="pipeline",
            build=build,
            golden=golden_model,
            layouts=layouts,
            stimulus=make_stimulus,
            params=(
                Param(
                    "stages",
                    core.DEFAULT_STAGES,
                    "pipeline registers (= latency)",
                    range=(1, core.max_stages()),
                ),
                Param("ftz", False, "flush subnormal inputs and results to signed zero"),
            ),
            defaults=defaults,
            check_count=special + 2000,
        )
    )


for _unit in UNITS:
    _register(_unit)
