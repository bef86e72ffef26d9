"""Bit-exact golden models of the IEEE 754 binary32 units, the behaviour the FP32 RTL must match.

Every function takes uint32 bit patterns (Python ints, sequences or numpy arrays, broadcast
against each other) and returns uint32 bit patterns (``bool`` for the comparisons): a Python
``int``/``bool`` when every argument is a scalar, a numpy array otherwise. All of it is vectorised
with numpy, so millions of vectors take seconds.

Arithmetic follows IEEE 754-2019 binary32 with round to nearest, ties to even:

* Subnormal inputs and results are handled exactly. With ``ftz=True`` a subnormal input is
  replaced by the zero of the same sign before the operation, and a result that is subnormal
  *after rounding* is replaced by the zero of its sign (a value that rounds up to the smallest
  normal number is kept).
* Every NaN result is the canonical quiet NaN ``CANONICAL_NAN = 0x7FC00000`` (signalling and quiet
  NaN inputs alike; no payload or sign propagation). Invalid operations (``inf - inf``,
  ``0 * inf``, ``0 / 0``, ``inf / inf``, ``fma(0, inf, c)``) give it too.
* An exact zero sum of operands of opposite sign is ``+0``; ``x / ±0 = ±inf`` for non-zero,
  non-NaN ``x``; ``1 / ±inf = ±0``; overflow rounds to ``±inf``.
* ``fma(a, b, c)`` is ``a * b + c`` rounded once; ``rcp(a)`` is ``div(1.0, a)``; both ``div`` and
  ``rcp`` are correctly rounded (error at most 0.5 ulp).

Comparisons (``lt``, ``le``, ``eq``) are IEEE quiet comparisons: any NaN operand makes them
false and ``unordered`` true; ``-0 == +0``. They take ``ftz`` too (subnormals compare as zero).

min/max NaN rule (``fmin``/``fmax``): **NaN propagating**. If either operand is a NaN the result is
``CANONICAL_NAN``; otherwise the smaller (larger) operand, with ``-0`` ordered below ``+0``. This is
the rule the ray-box test needs (gpurt ``src/shaders/IntersectCommon.hlsl`` ``fast_intersect_bbox``
and the RT IP 3.1 emulation in ``src/shaders/rtip3_opcode_emulation.hlsl``): a NaN slab bound must
survive ``max3``/``min3`` so that its ``isnan`` check forces a miss. There is no ``nan_mode``
parameter (IEEE 754-2019 ``minimum``/``maximum`` semantics, with the canonical NaN).

``neg`` and ``fabs`` are sign-bit operations (IEEE "quiet-computational" operations): they do not
canonicalise NaNs and do not flush subnormals.

How the models compute (independent of the references in ``tests/golden/test_fp32.py``):

* ``add``/``sub``/``mul``: exact integer significand arithmetic in uint64 (the adder aligns with
  38 guard bits and a sticky bit) and one shared round-and-pack step, :func:`round_pack`.
* ``div``/``rcp``: the float64 quotient of the two binary32 values rounded to binary32. The
  double rounding is innocuous because 53 >= 2 * 24 + 2 (Figueroa, "When is double rounding
  innocuous?", SIGNUM 1995); the tests confirm it exhaustively for ``rcp`` against exact integer
  arithmetic.
* ``fma``: the product is exact in float64; the sum is split into its float64 rounding and
  exact error (Knuth's TwoSum), rounded to odd in float64 and then to binary32, which is a
  correct single rounding because 53 >= 24 + 2 (Boldo and Melquiond, "Emulation of FMA and
  correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008).
"""

from typing import Any

import numpy as np

from gpurtl.facts.fp32 import CANONICAL_NAN, MAGNITUDE_MASK, NEG_INF, POS_INF, SIGN_BIT

#: Operands: a binary32 bit pattern (``int``) or an array of them; a scalar in gives a scalar
#: out, an array an array.
Bits = int | np.integer | np.ndarray

__all__ = [
    "CANONICAL_NAN",
    "POS_INF",
    "NEG_INF",
    "SIGN",
    "add",
    "sub",
    "mul",
    "fma",
    "rcp",
    "div",
    "lt",
    "le",
    "eq",
    "unordered",
    "fmin",
    "fmax",
    "neg",
    "fabs",
    "is_nan",
    "is_inf",
    "is_zero",
    "is_subnormal",
    "flush",
    "round_pack",
    "SPECIAL_VALUES",
    "special_values",
    "f2i",
    "i2f",
    "INT32_MIN",
    "INT32_MAX",
    "UINT32_MAX",
]

SIGN = SIGN_BIT
_MAG = MAGNITUDE_MASK


def _in(*args: Any) -> tuple[list[np.ndarray], bool]:
    """uint32 arrays of the arguments (broadcast), and whether all of them were scalars."""
    scalar = all(np.ndim(x) == 0 for x in args)
    arrays = [
        np.asarray(x).astype(np.int64).astype(np.uint32)
        if not (isinstance(x, np.ndarray) and x.dtype == np.uint32)
        else x
        for x in args
    ]
    return [np.ascontiguousarray(a) for a in np.broadcast_arrays(*arrays)], scalar


def _out(value, scalar):
    if scalar:
        value = value.reshape(())
        return bool(value) if value.dtype == np.bool_ else int(value)
    return value


def is_nan(x):
    """Bool array: ``x`` is a NaN (quiet or signalling)."""
    return (np.asarray(x, dtype=np.uint32) & _MAG) > POS_INF


def is_inf(x):
    return (np.asarray(x, dtype=np.uint32) & _MAG) == POS_INF


def is_zero(x):
    return (np.asarray(x, dtype=np.uint32) & _MAG) == 0


def is_subnormal(x):
    x = np.asarray(x, dtype=np.uint32)
    return ((x & POS_INF) == 0) & ((x & 0x007FFFFF) != 0)


def flush(x):
    """Subnormal patterns replaced by the zero of the same sign (uint32 array)."""
    x = np.asarray(x, dtype=np.uint32)
    return np.where((x & POS_INF) == 0, x & np.uint32(SIGN), x).astype(np.uint32)


def _finish(z, ftz):
    """Canonical NaN, and the ftz output flush."""
    z = np.asarray(z, dtype=np.uint32)
    if ftz:
        z = flush(z)
    return np.where(is_nan(z), np.uint32(CANONICAL_NAN), z).astype(np.uint32)


def _unpack(x):
    """(sign, significand as uint64, exponent of the significand's LSB as int64)."""
    sign = (x >> np.uint32(31)).astype(np.uint64)
    field = ((x >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
    frac = (x & np.uint32(0x7FFFFF)).astype(np.uint64)
    sig = np.where(field != 0, frac | np.uint64(1 << 23), frac)
    exp = np.maximum(field, 1) - 150
    return sign, sig, exp


def _msb(v):
    """Index of the most significant set bit of uint64 ``v`` (0 for ``v == 0``)."""
    v = v.astype(np.uint64)
    pos = np.zeros(v.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        upper = (v >> np.uint64(step)) != 0
        v = np.where(upper, v >> np.uint64(step), v)
        pos += np.where(upper, step, 0)
    return pos


def round_pack(sign, sig, exp, sticky=False):
    """Round ``(-1)**sign * (sig + eps) * 2**exp`` to binary32 (RNE), with IEEE overflow.

    ``sig`` is a uint64 array below ``2**63``; ``sticky`` says that a non-zero ``eps`` in
    ``(0, 1)`` is lost below ``sig``'s last bit (then ``sig`` must carry at least two bits below
    the rounding position, as every caller here does). Subnormal results are produced exactly;
    no flushing and no NaNs here. Returns uint32 bit patterns.
    """
    sign = np.asarray(sign).astype(np.uint64)
    sig = np.asarray(sig).astype(np.uint64)
    exp = np.asarray(exp).astype(np.int64)
    sticky = np.broadcast_to(np.asarray(sticky, dtype=bool), sig.shape)
    lead = _msb(sig) + exp  # exponent of the leading bit
    lsb = np.maximum(lead - 23, -149)  # exponent of the result's last bit
    shift = lsb - exp  # bits of sig below the result's last bit
    right = np.clip(shift, 0, 64).astype(np.uint64)
    left = np.clip(-shift, 0, 63).astype(np.uint64)
    kept = np.where(right >= 64, np.uint64(0), sig >> np.minimum(right, np.uint64(63)))
    kept = np.where(shift < 0, sig << left, kept)
    guard_pos = np.maximum(right, np.uint64(1)) - np.uint64(1)
    guard = (right >= 1) & (((sig >> np.minimum(guard_pos, np.uint64(63))) & np.uint64(1)) == 1)
    guard &= right <= 64
    below = np.where(
        guard_pos >= 64,
        sig,
        sig & ((np.uint64(1) << np.minimum(guard_pos, np.uint64(63))) - np.uint64(1)),
    )
    rest = np.where(right >= 1, below != 0, False) | sticky
    up = guard & (rest | ((kept & np.uint64(1)) == 1))
    kept = kept + up.astype(np.uint64)
    carry = kept >= np.uint64(1 << 24)
    kept = np.where(carry, kept >> np.uint64(1), kept)
    lsb = lsb + carry
    # q * 2**lsb with the implicit bit at 2**23 encodes as ((lsb + 149) << 23) + q.
    mag = kept.astype(np.int64) + ((lsb + 149) << 23)
    mag = np.where(kept == 0, 0, mag)
    mag = np.minimum(mag, POS_INF)  # overflow to infinity (RNE)
    return ((sign << np.uint64(31)).astype(np.int64) | mag).astype(np.uint32)


def _add(a, b, ftz):
    if ftz:
        a, b = flush(a), flush(b)
    sa, ma, ea = _unpack(a)
    sb, mb, eb = _unpack(b)
    # order by magnitude so that the big operand has the larger exponent
    swap = (a & np.uint32(_MAG)) < (b & np.uint32(_MAG))
    s1, m1, e1 = (np.where(swap, y, x) for x, y in ((sa, sb), (ma, mb), (ea, eb)))
    s2, m2, e2 = (np.where(swap, x, y) for x, y in ((sa, sb), (ma, mb), (ea, eb)))
    d = e1 - e2  # >= 0
    big = m1 << np.uint64(38)
    left = np.clip(38 - d, 0, 38).astype(np.uint64)
    right = np.clip(d - 38, 0, 63).astype(np.uint64)
    small = np.where(d <= 38, m2 << left, m2 >> right)
    lost = np.where(d <= 38, False, (m2 & ((np.uint64(1) << right) - np.uint64(1))) != 0) | (
        (d - 38) > 63
    ) & (m2 != 0)
    small = small | lost.astype(np.uint64)  # jam the sticky bit (far below the guard bits)
    same = s1 == s2
    mag = np.where(same, big + small, big - small)  # big >= small, so no borrow
    z = round_pack(s1, mag, e1 - 38)
    zero = mag == 0
    z = np.where(zero, ((s1 & s2) << np.uint64(31)).astype(np.uint32), z)
    # specials
    inf_a, inf_b = is_inf(a), is_inf(b)
    z = np.where(inf_a, a, np.where(inf_b, b, z))
    nan = is_nan(a) | is_nan(b) | (inf_a & inf_b & (a != b))
    z = np.where(nan, np.uint32(CANONICAL_NAN), z)
    return _finish(z, ftz)


def add(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a + b`` (binary32 bit patterns, RNE)."""
    (a, b), scalar = _in(a, b)
    return _out(_add(a, b, ftz), scalar)


def sub(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a - b``: ``a + (-b)`` (a NaN ``b`` stays a NaN)."""
    (a, b), scalar = _in(a, b)
    return _out(_add(a, b ^ np.uint32(SIGN), ftz), scalar)


def mul(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a * b`` (binary32 bit patterns, RNE)."""
    (a, b), scalar = _in(a, b)
    if ftz:
        a, b = flush(a), flush(b)
    sa, ma, ea = _unpack(a)
    sb, mb, eb = _unpack(b)
    sign = sa ^ sb
    z = round_pack(sign, ma * mb, ea + eb)
    inf = is_inf(a) | is_inf(b)
    z = np.where(inf, ((sign << np.uint64(31)) | np.uint64(POS_INF)).astype(np.uint32), z)
    nan = is_nan(a) | is_nan(b) | (inf & (is_zero(a) | is_zero(b)))
    z = np.where(nan, np.uint32(CANONICAL_NAN), z)
    return _out(_finish(z, ftz), scalar)


def _f32(x):
    return x.view(np.float32)


def fma(a: Bits, b: Bits, c: Bits, *, ftz: bool = False) -> Any:
    """``a * b + c`` with a single rounding (binary32 bit patterns, RNE)."""
    (a, b, c), scalar = _in(a, b, c)
    if ftz:
        a, b, c = flush(a), flush(b), flush(c)
    with np.errstate(all="ignore"):
        p = _f32(a).astype(np.float64) * _f32(b).astype(np.float64)  # exact
        cd = _f32(c).astype(np.float64)
        s = p + cd
        bv = s - p
        err = (p - (s - bv)) + (cd - bv)  # TwoSum: p + c == s + err
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        toward = np.where(err > 0, np.inf, -np.inf)
        fix = (err != 0) & even & np.isfinite(s)
        s = np.where(fix, np.nextafter(s, toward), s)  # round to odd
        z = s.astype(np.float32).view(np.uint32)
    return _out(_finish(z, ftz), scalar)


def _div(a, b, ftz):
    if ftz:
        a, b = flush(a), flush(b)
    with np.errstate(all="ignore"):
        q = _f32(a).astype(np.float64) / _f32(b).astype(np.float64)
        z = q.astype(np.float32).view(np.uint32)
    return _finish(z, ftz)


def div(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a / b``, correctly rounded (binary32 bit patterns, RNE)."""
    (a, b), scalar = _in(a, b)
    return _out(_div(a, b, ftz), scalar)


def rcp(a: Bits, *, ftz: bool = False) -> Any:
    """``1 / a``, correctly rounded: ``div(0x3F800000, a)``."""
    (a,), scalar = _in(a)
    return _out(_div(np.full_like(a, 0x3F800000), a, ftz), scalar)


def _key(x):
    """Signed integer key that orders non-NaN patterns numerically, with -0 == +0."""
    mag = (x & np.uint32(_MAG)).astype(np.int64)
    return np.where((x >> np.uint32(31)) == 1, -mag, mag)


def _cmp_in(a, b, ftz):
    (a, b), scalar = _in(a, b)
    if ftz:
        a, b = flush(a), flush(b)
    return a, b, is_nan(a) | is_nan(b), scalar


def lt(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a < b`` (false when either is a NaN)."""
    a, b, un, scalar = _cmp_in(a, b, ftz)
    return _out(~un & (_key(a) < _key(b)), scalar)


def le(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a <= b`` (false when either is a NaN)."""
    a, b, un, scalar = _cmp_in(a, b, ftz)
    return _out(~un & (_key(a) <= _key(b)), scalar)


def eq(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """``a == b`` (false when either is a NaN; ``-0 == +0``)."""
    a, b, un, scalar = _cmp_in(a, b, ftz)
    return _out(~un & (_key(a) == _key(b)), scalar)


def unordered(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """Either operand is a NaN."""
    a, b, un, scalar = _cmp_in(a, b, ftz)
    return _out(un, scalar)


def _order(x):
    """Total-order key with -0 below +0 (for min/max)."""
    mag = (x & np.uint32(_MAG)).astype(np.int64)
    return np.where((x >> np.uint32(31)) == 1, -mag - 1, mag)


def fmin(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """Smaller operand; NaN if either is a NaN; ``-0 < +0``. ``ftz`` flushes subnormal inputs."""
    a, b, un, scalar = _cmp_in(a, b, ftz)
    z = np.where(_order(b) < _order(a), b, a)
    return _out(np.where(un, np.uint32(CANONICAL_NAN), z).astype(np.uint32), scalar)


def fmax(a: Bits, b: Bits, *, ftz: bool = False) -> Any:
    """Larger operand; NaN if either is a NaN; ``+0 > -0``. ``ftz`` flushes subnormal inputs."""
    a, b, un, scalar = _cmp_in(a, b, ftz)
    z = np.where(_order(b) > _order(a), b, a)
    return _out(np.where(un, np.uint32(CANONICAL_NAN), z).astype(np.uint32), scalar)


def neg(a):
    """Sign bit flipped (NaNs included, not canonicalised)."""
    (a,), scalar = _in(a)
    return _out(a ^ np.uint32(SIGN), scalar)


def fabs(a):
    """Sign bit cleared (NaNs included, not canonicalised)."""
    (a,), scalar = _in(a)
    return _out(a & np.uint32(_MAG), scalar)


#: Bit patterns every FP32 test crosses with each other: signed zeros, the extreme subnormals and
#: normals, ones, infinities, quiet and signalling NaNs (both signs), and values whose sums,
#: products and quotients tie, overflow or underflow (see :func:`special_values`).
SPECIAL_VALUES = (
    0x00000000,
    0x00000001,
    0x007FFFFF,
    0x00800000,
    0x7F7FFFFF,
    0x3F800000,
    0x7F800000,
    0x7FC00000,
    0x7F800001,
    0x7FA00000,
    0x00400000,  # a mid-range subnormal
    0x3F800001,
    0x3F7FFFFF,  # 1 + ulp, 1 - ulp/2: ties and carries in add/mul
    0x33800000,
    0x33800001,  # 2**-24 (1 + 2**-24 ties to 1), just above
    0x4B000000,  # 2**23: integer spacing, ties of x + 0.5
    0x3F000000,  # 0.5
    0x40400000,  # 3.0 (non-terminating reciprocal)
    0x5F800000,
    0x7F000000,  # 2**64, 2**127: products and sums that overflow
    0x1A000000,
    0x1A000001,  # 2**-75 (squares to the tie 2**-150), just above
    0x20000000,
    0x00800001,  # 2**-63 (products underflow into subnormals), min normal + ulp
    0x3FFFFFFF,
    0x3FC00000,  # just below 2, 1.5
)


def special_values(signed=True):
    """``SPECIAL_VALUES`` with both signs (a list of ints)."""
    values = list(SPECIAL_VALUES)
    if signed:
        values += [v | SIGN for v in SPECIAL_VALUES]
    return values


# --- conversions between binary32 and 32-bit integers --------------------------------------------

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1


def f2i(a: Bits, signed: Bits, *, ftz: bool = False) -> Any:
    """binary32 -> int32 (``signed`` true) or uint32 (``signed`` false), rounding toward zero.

    The behaviour of GPU ``cvt_i32_f32`` / ``cvt_u32_f32`` and of C casts for in-range values.
    Out of range (infinities included) saturates to the target type's limit: ``INT32_MIN`` /
    ``INT32_MAX`` or ``0`` / ``UINT32_MAX``; a NaN gives ``0``. This NaN and saturation rule is
    the documented choice of this library (it is what AMD GPUs do; C leaves it undefined).

    ``invalid`` is true exactly when the result had to saturate or the input is a NaN. A
    negative value that truncates to zero (``-0.5`` into uint32, ``-0``) gives ``0`` and is not
    invalid. Subnormals truncate to ``0`` either way, so ``ftz`` changes nothing (kept for
    uniformity with the other units).

    Returns ``(z, invalid)``: uint32 two's-complement patterns and a bool array (an ``int`` and
    a ``bool`` for scalar arguments).
    """
    (a, signed), scalar = _in(a, signed)
    if ftz:
        a = flush(a)
    signed = signed != 0
    sign, sig, exp = _unpack(a)  # |a| = sig * 2**exp
    # exp >= 9 means |a| >= 2**32 for every non-zero sig (the field is then >= 159): cap the
    # left shift at 16, which keeps such values far beyond every limit
    left = np.clip(exp, 0, 16).astype(np.uint64)
    right = np.clip(-exp, 0, 63).astype(np.uint64)
    mag = np.where(exp >= 0, sig << left, sig >> right).astype(np.int64)
    value = np.where(sign == 1, -mag, mag)
    lo = np.where(signed, INT32_MIN, 0)
    hi = np.where(signed, INT32_MAX, UINT32_MAX)
    nan = is_nan(a)
    invalid = nan | (value < lo) | (value > hi)
    z = np.where(nan, 0, np.clip(value, lo, hi))
    z = (z & 0xFFFFFFFF).astype(np.uint32)
    return _out(z, scalar), _out(invalid, scalar)


def i2f(a: Bits, signed: Bits, *, ftz: bool = False) -> Any:
    """int32 (``signed`` true) or uint32 (``signed`` false) bit pattern ``a`` -> binary32, RNE.

    Exact for magnitudes below ``2**24``; ``0`` gives ``+0``; ``0xFFFFFFFF`` as uint32 rounds
    to ``2**32``. Results are never subnormal, so ``ftz`` changes nothing (kept for uniformity).
    Negative Python ints are taken as their 32-bit two's-complement patterns.
    """
    (a, signed), scalar = _in(a, signed)
    neg = (signed != 0) & ((a >> np.uint32(31)) == 1)
    wide = a.astype(np.int64)
    mag = np.where(neg, (1 << 32) - wide, wide).astype(np.uint64)
    z = round_pack(neg, mag, np.zeros(mag.shape, dtype=np.int64))
    return _out(_finish(z, ftz), scalar)
