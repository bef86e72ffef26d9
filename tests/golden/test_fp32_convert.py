"""Checks of the FP32 <-> int32/uint32 conversions (gpurtl.golden.fp32.f2i / i2f) against
independent references.

* f2i: numpy float64 ``np.trunc`` plus clipping (every binary32 value is exact in float64), over
  every exponent field with random significands, both signs and both target types; exact
  ``fractions.Fraction`` truncation on the boundary values.
* i2f: numpy's int64 -> float32 conversion (IEEE round to nearest even) for integers with their
  leading bit at every position; an integer round-to-nearest-even written here on the ties.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from gpurtl.golden import fp32 as g

LIMITS = {True: (-(1 << 31), (1 << 31) - 1), False: (0, (1 << 32) - 1)}


def rand_bits(rng, n):
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


def every_exponent(rng, per_field):
    """Random significands and signs under every exponent field 0..255."""
    field = np.repeat(np.arange(256, dtype=np.uint32), per_field)
    return (rand_bits(rng, field.size) & np.uint32(0x807FFFFF)) | (field << np.uint32(23))


def f2i_numpy(a, signed):
    lo, hi = LIMITS[signed]
    with np.errstate(invalid="ignore"):
        x = a.view(np.float32).astype(np.float64)
        t = np.trunc(x)
        nan = np.isnan(x)
        invalid = nan | (t < lo) | (t > hi)
        z = np.where(nan, 0.0, np.clip(t, lo, hi)).astype(np.int64)
    return (z & 0xFFFFFFFF).astype(np.uint32), invalid


def f2i_fraction(bits, signed):
    """Exact truncation of one pattern with Fraction (NaN -> 0, saturating)."""
    field, frac, neg = (bits >> 23) & 0xFF, bits & 0x7FFFFF, bits >> 31
    lo, hi = LIMITS[signed]
    if field == 0xFF:
        if frac:
            return 0, True
        return (lo if neg else hi) & 0xFFFFFFFF, True
    sig = frac | (1 << 23) if field else frac
    value = Fraction(sig) * Fraction(2) ** (max(field, 1) - 150)
    t = math.trunc(-value if neg else value)
    if t < lo or t > hi:
        return min(max(t, lo), hi) & 0xFFFFFFFF, True
    return t & 0xFFFFFFFF, False


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("ftz", [False, True])
def test_f2i_against_numpy_every_exponent(signed, ftz):
    rng = np.random.default_rng(11 + signed)
    a = np.concatenate(
        [
            every_exponent(rng, 2000),
            rand_bits(rng, 200_000),
            np.array(g.special_values(), dtype=np.uint32),
        ]
    )
    z, invalid = g.f2i(a, np.full(a.size, int(signed)), ftz=ftz)
    ref_z, ref_invalid = f2i_numpy(a, signed)
    bad = (z != ref_z) | (invalid != ref_invalid)
    assert not bad.any(), [hex(v) for v in a[bad][:5]]


BOUNDARY = [
    0x00000000,
    0x80000000,
    0x00000001,
    0x807FFFFF,  # zeros, subnormals
    0x3F800000,
    0xBF800000,
    0x3F000000,
    0xBF000000,  # +-1, +-0.5
    0x3FC00000,
    0xBFC00000,
    0x3F7FFFFF,
    0xBF7FFFFF,  # +-1.5, just below 1
    0x4F000000,
    0xCF000000,
    0x4EFFFFFF,
    0xCEFFFFFF,  # +-2**31, 2**31 - 128
    0xCF000001,  # -2**31 - 256
    0x4F800000,
    0x4F7FFFFF,
    0xCF800000,  # 2**32, 2**32 - 256
    0x4B000001,
    0xCB7FFFFF,  # 2**23 + 1, -(2**24 - 1)
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x7F800000,
    0xFF800000,  # largest finite, infinities
    0x7FC00000,
    0xFFC00000,
    0x7F800001,
    0xFFA00000,  # NaNs
]


@pytest.mark.parametrize("signed", [True, False])
def test_f2i_fraction_boundaries(signed):
    a = np.array(BOUNDARY, dtype=np.uint32)
    z, invalid = g.f2i(a, int(signed))
    for bits, zi, inv in zip(BOUNDARY, z.tolist(), invalid.tolist()):
        assert (zi, inv) == f2i_fraction(bits, signed), hex(bits)


def test_f2i_documented_cases():
    # scalar in, scalar out
    assert g.f2i(0xBF000000, 0) == (0, False)  # -0.5 into uint32: 0, valid
    assert g.f2i(0xBF800000, 0) == (0, True)  # -1.0 into uint32 saturates
    assert g.f2i(0xCF000000, 1) == (0x80000000, False)  # -2**31 is representable
    assert g.f2i(0x4F000000, 1) == (0x7FFFFFFF, True)  # 2**31 is not
    assert g.f2i(0x7FC00000, 1) == (0, True)  # NaN -> 0
    assert g.f2i(0xFF800000, 1) == (0x80000000, True)
    assert g.f2i(0x7F800000, 0) == (0xFFFFFFFF, True)


def rne_int(n):
    """Round a Python int to binary32 with integer arithmetic (ties to even); returns a float."""
    neg, n = n < 0, abs(n)
    bits = n.bit_length()
    if bits > 24:
        drop = bits - 24
        q, r = divmod(n, 1 << drop)
        half = 1 << (drop - 1)
        if r > half or (r == half and q & 1):
            q += 1
        n = q << drop
    value = float(Fraction(n))
    return -value if neg else value


def as_int(bits, signed):
    return bits - (1 << 32) if signed and bits >> 31 else bits


def leading_bit_everywhere(rng, per_position):
    """uint32 patterns whose leading one is at every position 0..31 (and zero)."""
    pos = np.repeat(np.arange(32, dtype=np.uint64), per_position)
    low = rand_bits(rng, pos.size).astype(np.uint64) & ((np.uint64(1) << pos) - np.uint64(1))
    return np.concatenate([[0], ((np.uint64(1) << pos) | low)]).astype(np.uint32)


@pytest.mark.parametrize("signed", [True, False])
def test_i2f_against_numpy(signed):
    rng = np.random.default_rng(5 + signed)
    pos = leading_bit_everywhere(rng, 3000)
    a = np.concatenate([pos, -pos.astype(np.int64) & 0xFFFFFFFF, rand_bits(rng, 200_000)]).astype(
        np.uint32
    )
    ints = np.where(signed & (a >> 31 == 1), a.astype(np.int64) - (1 << 32), a.astype(np.int64))
    ref = ints.astype(np.float32).view(np.uint32)  # numpy/C conversion: RNE
    z = g.i2f(a, int(signed))
    bad = z != ref
    assert not bad.any(), [hex(v) for v in a[bad][:5]]


TIES = [
    0,
    1,
    -1,
    (1 << 24) + 1,
    (1 << 24) + 3,
    (1 << 25) + 2,
    (1 << 25) + 3,
    (1 << 25) + 6,
    (1 << 31) - 1,
    -(1 << 31),
    -(1 << 31) + 1,
    (1 << 31) - 64,
    (1 << 31) - 192,
    -((1 << 24) + 1),
    0x7FFFFFC0,
    0x7FFFFF80,
    0x7FFFFF40,
]
UNSIGNED_TIES = [
    (1 << 32) - 1,
    (1 << 32) - 128,
    (1 << 32) - 384,
    (1 << 31) + 128,
    (1 << 31) + 384,
    0x80000000,
]


def test_i2f_ties_against_integer_rounding():
    for n in TIES:
        z = g.i2f(n & 0xFFFFFFFF, 1)
        assert np.uint32(z).view(np.float32) == np.float32(rne_int(n)), n
    for n in UNSIGNED_TIES + [t for t in TIES if t >= 0]:
        z = g.i2f(n, 0)
        assert np.uint32(z).view(np.float32) == np.float32(rne_int(n)), n
    # the reference itself: ties go to even
    assert rne_int((1 << 24) + 1) == 1 << 24
    assert rne_int((1 << 24) + 3) == (1 << 24) + 4
    assert rne_int((1 << 32) - 1) == 1 << 32


def test_i2f_fixed_points():
    assert g.i2f(0, 1) == 0 and g.i2f(0, 0) == 0  # +0 either way
    assert g.i2f(0xFFFFFFFF, 0) == 0x4F800000  # 2**32
    assert g.i2f(0xFFFFFFFF, 1) == 0xBF800000  # -1
    assert g.i2f(0x80000000, 1) == 0xCF000000  # INT32_MIN
    assert g.i2f(-5, 1) == g.i2f(0xFFFFFFFB, 1)  # negative ints as patterns


def test_round_trip_exact_for_small_integers():
    n = np.arange(-(1 << 16), 1 << 16, 7, dtype=np.int64)
    bits = (n & 0xFFFFFFFF).astype(np.uint32)
    z, invalid = g.f2i(g.i2f(bits, 1), 1)
    assert not invalid.any() and (z == bits).all()
