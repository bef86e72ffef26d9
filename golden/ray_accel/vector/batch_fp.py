"""FP32 operations of :mod:`gpurtl.golden.fp32` on large arrays, computed with the CPU's own
binary32 arithmetic where that gives the same bits.

``gpurtl.golden.fp32`` defines the arithmetic (IEEE 754 binary32, round to nearest even,
subnormals kept, every NaN result the canonical ``0x7FC00000``; ``ftz`` flushes subnormal inputs
and results) and emulates ``add``/``sub``/``mul`` with integer significands, which is exact but
slow. numpy's ``float32`` add, subtract and multiply are IEEE 754 binary32 operations rounded to
nearest even with gradual underflow, so the only differences are the NaN patterns (fixed here by
canonicalising) and flushing (done here on the inputs and the result, as the golden model does).
``fma``, ``rcp`` and the comparisons need no change of method: they already run on whole arrays
(``fma`` and ``rcp`` through float64). ``tests/golden/ray_accel/test_ray_accel_batch.py`` checks every
function here against :mod:`gpurtl.golden.fp32` on the special values crossed with each other and
on random patterns.

All functions take and return uint32 bit-pattern arrays (bool for comparisons).
"""

import numpy as np

from gpurtl.golden import fp32

__all__ = [
    "CANONICAL_NAN",
    "add",
    "flush",
    "fma",
    "grow",
    "is_nan",
    "le",
    "lt",
    "mul",
    "rcp",
    "sub",
]

CANONICAL_NAN = fp32.CANONICAL_NAN
_MAG = np.uint32(0x7FFFFFFF)
_INF = np.uint32(fp32.POS_INF)
_EXP = np.uint32(fp32.POS_INF)
_SIGN = np.uint32(fp32.SIGN)


def _u32(x):
    x = np.asarray(x)
    return x if x.dtype == np.uint32 else x.astype(np.int64).astype(np.uint32)


def is_nan(x):
    return (_u32(x) & _MAG) > _INF


def flush(x):
    """Subnormal patterns replaced by the zero of their sign."""
    x = _u32(x)
    return np.where((x & _EXP) == 0, x & _SIGN, x)


def _finish(z, ftz):
    if ftz:
        z = flush(z)
    return np.where((z & _MAG) > _INF, np.uint32(CANONICAL_NAN), z)


def _native(op, a, b, ftz):
    a, b = _u32(a), _u32(b)
    if ftz:
        a, b = flush(a), flush(b)
    with np.errstate(all="ignore"):
        z = op(a.view(np.float32), b.view(np.float32)).view(np.uint32)
    return _finish(z, ftz)


def add(a, b, *, ftz=False):
    """``a + b`` (same bits as :func:`gpurtl.golden.fp32.add`)."""
    return _native(np.add, a, b, ftz)


def sub(a, b, *, ftz=False):
    """``a - b`` (same bits as :func:`gpurtl.golden.fp32.sub`)."""
    return _native(np.subtract, a, b, ftz)


def mul(a, b, *, ftz=False):
    """``a * b`` (same bits as :func:`gpurtl.golden.fp32.mul`)."""
    return _native(np.multiply, a, b, ftz)


def fma(a, b, c, *, ftz=False):
    """``a * b + c`` rounded once (:func:`gpurtl.golden.fp32.fma`)."""
    return np.asarray(fp32.fma(_u32(a), _u32(b), _u32(c), ftz=ftz), dtype=np.uint32)


_GROW_FACTOR = 1.0 + np.arange(256, dtype=np.float64) * 2.0**-24


def grow(max_t, box_grow, *, ftz=False):
    """``fma(max_t, box_grow * 2**-24, max_t)`` (:func:`.box_test.grow_max` for ``box_grow``
    1..255): ``max_t * (1 + box_grow * 2**-24)`` is exact in float64 (24 + 25 significant
    bits), so casting it to float32 rounds the exact value once, as the FMA does."""
    max_t = _u32(max_t)
    if ftz:
        max_t = flush(max_t)
    factor = _GROW_FACTOR[np.asarray(box_grow).astype(np.intp) & 0xFF]
    with np.errstate(all="ignore"):
        z = (max_t.view(np.float32).astype(np.float64) * factor).astype(np.float32)
    return _finish(z.view(np.uint32), ftz)


def rcp(a, *, ftz=False):
    """``1 / a`` correctly rounded (:func:`gpurtl.golden.fp32.rcp`)."""
    return np.asarray(fp32.rcp(_u32(a), ftz=ftz), dtype=np.uint32)


def _compare(op, a, b, ftz):
    a, b = _u32(a), _u32(b)
    if ftz:
        a, b = flush(a), flush(b)
    with np.errstate(invalid="ignore"):
        return op(a.view(np.float32), b.view(np.float32))


def lt(a, b, *, ftz=False):
    """IEEE ``a < b`` (false with a NaN operand; ``-0 == +0``)."""
    return _compare(np.less, a, b, ftz)


def le(a, b, *, ftz=False):
    """IEEE ``a <= b`` (false with a NaN operand; ``-0 == +0``)."""
    return _compare(np.less_equal, a, b, ftz)
