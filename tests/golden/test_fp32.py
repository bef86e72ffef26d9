"""Checks of the FP32 golden models (gpurtl.golden.fp32) against independent references.

* add/sub/mul: numpy float32 arithmetic (IEEE binary32 RNE with subnormals) on millions of
  vectors, NaNs canonicalised.
* fma/div/rcp: Berkeley SoftFloat (softfloatpy) and exact rational arithmetic
  (``fractions.Fraction``) rounded by a round-to-nearest-even written here.
* rcp exhaustively over all 2**23 significands at several exponents (subnormal inputs, results
  that overflow, that are subnormal), checked with exact integer inequalities.
"""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import softfloatpy as sf

from gpurtl.golden import fp32 as g

NAN = g.CANONICAL_NAN


def canon(z):
    z = np.asarray(z).view(np.uint32) if np.asarray(z).dtype != np.uint32 else np.asarray(z)
    return np.where(g.is_nan(z), np.uint32(NAN), z).astype(np.uint32)


def rand_bits(rng, n):
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


def near_exponent(rng, a, spread):
    """Random patterns whose exponent is within ``spread`` of ``a``'s (cancellation, ties)."""
    n = a.size
    field = ((a >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
    field = np.clip(field + rng.integers(-spread, spread + 1, n), 0, 254).astype(np.uint32)
    return (rand_bits(rng, n) & np.uint32(0x807FFFFF)) | (field << np.uint32(23))


def small_exponents(rng, n):
    """Patterns with exponent fields 0..30 (subnormal operands and results)."""
    field = rng.integers(0, 31, n).astype(np.uint32)
    return (rand_bits(rng, n) & np.uint32(0x807FFFFF)) | (field << np.uint32(23))


def workload(rng, n):
    a = np.concatenate([rand_bits(rng, n), small_exponents(rng, n), rand_bits(rng, n)])
    b = np.concatenate(
        [rand_bits(rng, n), small_exponents(rng, n), near_exponent(rng, a[2 * n :], 30)]
    )
    return a, b


def specials_pairs():
    values = np.array(g.special_values(), dtype=np.uint32)
    a, b = np.meshgrid(values, values)
    return a.ravel(), b.ravel()


def np_ref(op, a, b, ftz):
    if ftz:
        a, b = g.flush(a), g.flush(b)
    with np.errstate(all="ignore"):
        z = op(a.view(np.float32), b.view(np.float32)).view(np.uint32)
    if ftz:
        z = g.flush(z)
    return canon(z)


@pytest.mark.parametrize("ftz", [False, True])
@pytest.mark.parametrize(
    "name,op", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)]
)
def test_against_numpy_float32(name, op, ftz):
    rng = np.random.default_rng(1 + ftz)
    a, b = workload(rng, 400_000)
    sa, sb = specials_pairs()
    a, b = np.concatenate([sa, a]), np.concatenate([sb, b])
    got = getattr(g, name)(a, b, ftz=ftz)
    want = np_ref(op, a, b, ftz)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [
        (f"{a[i]:08x}", f"{b[i]:08x}", f"{got[i]:08x}", f"{want[i]:08x}") for i in bad[:5]
    ]


def _sf(bits):
    return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))


def _bits(value):
    z = int.from_bytes(value.to_bytes(), "big")
    return NAN if (z & 0x7FFFFFFF) > 0x7F800000 else z


def round_fraction(q):
    """Binary32 bit pattern of the exact rational ``q`` rounded to nearest even (q != 0)."""
    sign = 0x80000000 if q < 0 else 0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    lsb = max(e - 23, -149)
    scaled = q / Fraction(2) ** lsb
    n = scaled.numerator // scaled.denominator
    rest = scaled - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n & 1):
        n += 1
    bits = ((lsb + 149) << 23) + n
    return sign | min(bits, 0x7F800000)


def value(bits):
    """Exact rational value of a finite binary32 pattern."""
    sign = -1 if bits >> 31 else 1
    field, frac = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    sig = frac | (1 << 23) if field else frac
    return sign * Fraction(sig) * Fraction(2) ** (max(field, 1) - 150)


def finite(x):
    return (x & 0x7F800000) != 0x7F800000


def test_round_fraction_self_check():
    # the reference rounding agrees with numpy float32 on exact binary32 sums
    rng = np.random.default_rng(5)
    a, b = workload(rng, 700)
    for x, y in zip(a.tolist(), b.tolist()):
        if finite(x) and finite(y):
            exact = value(x) + value(y)
            want = np_ref(np.add, np.uint32([x]), np.uint32([y]), False)[0]
            if exact != 0:
                assert round_fraction(exact) == want


def fma_vectors(rng, n):
    a, b = workload(rng, n)
    c = np.concatenate([rand_bits(rng, n), small_exponents(rng, n), rand_bits(rng, n)])
    # cancellation: c close to -a*b
    with np.errstate(all="ignore"):
        p = (a[:n].view(np.float32) * b[:n].view(np.float32)).view(np.uint32)
    delta = rng.integers(-3, 4, n).astype(np.int64)
    near = ((p.astype(np.int64) + delta) & 0xFFFFFFFF).astype(np.uint32) ^ np.uint32(0x80000000)
    values = np.array(g.special_values(), dtype=np.uint32)[::3]
    ta, tb, tc = (x.ravel() for x in np.meshgrid(values, values, values))
    return (
        np.concatenate([ta, a, a[:n]]),
        np.concatenate([tb, b, b[:n]]),
        np.concatenate([tc, c, near]),
    )


@pytest.mark.parametrize("ftz", [False, True])
def test_fma_softfloat(ftz):
    rng = np.random.default_rng(11 + ftz)
    a, b, c = fma_vectors(rng, 15_000)
    got = g.fma(a, b, c, ftz=ftz)
    if ftz:
        a, b, c = g.flush(a), g.flush(b), g.flush(c)
    want = np.array(
        [
            _bits(sf.f32_mul_add(_sf(x), _sf(y), _sf(z)))
            for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())
        ],
        dtype=np.uint32,
    )
    if ftz:
        want = g.flush(want)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [
        (f"{a[i]:08x}", f"{b[i]:08x}", f"{c[i]:08x}", f"{got[i]:08x}", f"{want[i]:08x}")
        for i in bad[:5]
    ]


def test_fma_fraction():
    rng = np.random.default_rng(12)
    a, b, c = fma_vectors(rng, 1500)
    got = g.fma(a, b, c)
    checked = 0
    for x, y, z, r in zip(a.tolist(), b.tolist(), c.tolist(), got.tolist()):
        if finite(x) and finite(y) and finite(z):
            exact = value(x) * value(y) + value(z)
            if exact != 0:
                assert r == round_fraction(exact), (hex(x), hex(y), hex(z), hex(r))
                checked += 1
    assert checked > 3000


@pytest.mark.parametrize("ftz", [False, True])
def test_div_softfloat(ftz):
    rng = np.random.default_rng(21 + ftz)
    a, b = workload(rng, 15_000)
    sa, sb = specials_pairs()
    a, b = np.concatenate([sa, a]), np.concatenate([sb, b])
    got = g.div(a, b, ftz=ftz)
    if ftz:
        a, b = g.flush(a), g.flush(b)
    want = np.array(
        [_bits(sf.f32_div(_sf(x), _sf(y))) for x, y in zip(a.tolist(), b.tolist())], dtype=np.uint32
    )
    if ftz:
        want = g.flush(want)
    assert np.array_equal(got, want)


def test_div_fraction():
    rng = np.random.default_rng(22)
    a, b = workload(rng, 1500)
    got = g.div(a, b)
    for x, y, r in zip(a.tolist(), b.tolist(), got.tolist()):
        if finite(x) and finite(y) and (y & 0x7FFFFFFF) and (x & 0x7FFFFFFF):
            assert r == round_fraction(value(x) / value(y)), (hex(x), hex(y), hex(r))


def rcp_exact_ok(x, z):
    """Vectorised exact test that ``z`` is 1/x rounded to nearest even (finite non-zero x)."""
    x = x.astype(np.int64)
    z = z.astype(np.int64)
    field = (x >> 23) & 0xFF
    X = np.where(field != 0, (x & 0x7FFFFF) | (1 << 23), x & 0x7FFFFF)
    ex = np.maximum(field, 1) - 150
    zmag = z & 0x7FFFFFFF
    sign_ok = (z >> 31) == (x >> 31)
    inf = zmag == 0x7F800000
    zf = (zmag >> 23) & 0xFF
    R = np.where(zf != 0, (zmag & 0x7FFFFF) | (1 << 23), zmag & 0x7FFFFF)
    er = np.maximum(zf, 1) - 150
    even = (R & 1) == 0

    def cmp_pow2(n, t):
        """sign of n - 2**t for n >= 0 integer arrays (n < 2**62)."""
        big = t > 62
        neg = t < 0
        tt = np.clip(t, 0, 62)
        p = np.left_shift(np.int64(1), tt)
        s = np.sign(n - p)
        return np.where(big, -1, np.where(neg, np.where(n > 0, 1, -1), s))

    # upper midpoint (2R+1) 2**(er-1) >= 1/x  <=>  (2R+1) X >= 2**-(er - 1 + ex)
    up = cmp_pow2((2 * R + 1) * X, -(er - 1 + ex))
    # lower midpoint: (4R-2) 2**(er-2), or (4R-1) 2**(er-2) at the bottom of a normal binade
    lower_sig = np.where((R == (1 << 23)) & (zf > 1), 4 * R - 1, 4 * R - 2)
    low = cmp_pow2(lower_sig * X, -(er - 2 + ex))
    ok_up = (up > 0) | ((up == 0) & even)
    ok_low = (low < 0) | ((low == 0) & even)
    # overflow: 1/x >= (2**25 - 1) 2**103  <=>  (2**25 - 1) X <= 2**-(103 + ex)
    ovf = cmp_pow2((2**25 - 1) * X, -(103 + ex))
    ok_inf = ovf <= 0
    return sign_ok & np.where(inf, ok_inf, ok_up & ok_low & (zmag != 0))


@pytest.mark.parametrize(
    "field",
    [0, 253, 254] + [pytest.param(field, marks=pytest.mark.full) for field in (1, 127, 252)],
)
def test_rcp_exhaustive(field):
    """Every significand of one binade (both signs alternately): exact integer check. The
    default tier checks the subnormal binade and the two where the result leaves the normal
    range; ``make test-full`` adds three ordinary ones."""
    frac = np.arange(1 << 23, dtype=np.uint32)
    x = (np.uint32(field) << np.uint32(23)) | frac
    x = np.where(frac & 1, x | np.uint32(0x80000000), x).astype(np.uint32)
    if field == 0:
        x = x[1:]
    z = g.rcp(x)
    ok = rcp_exact_ok(x, z)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, [(f"{x[i]:08x}", f"{z[i]:08x}") for i in bad[:5]]
    # a sample through SoftFloat as well
    for i in np.linspace(0, x.size - 1, 2000).astype(int):
        assert z[i] == _bits(sf.f32_div(_sf(0x3F800000), _sf(x[i])))


def test_rcp_exact_checker_can_fail():
    x = np.array([0x40400000, 0x7F7FFFFF, 0x00000001], dtype=np.uint32)
    z = g.rcp(x)
    assert rcp_exact_ok(x, z).all()
    assert not rcp_exact_ok(x, z + np.uint32(1)).any()
    assert not rcp_exact_ok(x, z - np.uint32(1))[:2].any()


def test_rcp_specials():
    assert g.rcp(0) == 0x7F800000 and g.rcp(0x80000000) == 0xFF800000
    assert g.rcp(0x7F800000) == 0 and g.rcp(0xFF800000) == 0x80000000
    assert g.rcp(0x7F800001) == NAN and g.rcp(0xFFC00000) == NAN
    assert g.rcp(0x00000001) == 0x7F800000  # 2**149 overflows
    assert g.rcp(0x7F7FFFFF) == 0x00200000 or g.rcp(0x7F7FFFFF) == 0x00200001
    assert g.rcp(0x00000001, ftz=True) == 0x7F800000  # flushed to +0 first
    assert g.rcp(0x7F000000) == 0x00400000  # 2**-127 subnormal, exact
    assert g.rcp(0x7F000000, ftz=True) == 0


def test_compare_and_minmax():
    values = g.special_values()
    for x, y in itertools.product(values, repeat=2):
        fx, fy = _sf(x), _sf(y)
        assert g.lt(x, y) == sf.f32_lt_quiet(fx, fy)
        assert g.le(x, y) == sf.f32_le_quiet(fx, fy)
        assert g.eq(x, y) == sf.f32_eq(fx, fy)
        nan = sf.f32_is_nan(fx) or sf.f32_is_nan(fy)
        assert g.unordered(x, y) == nan
        lo, hi = g.fmin(x, y), g.fmax(x, y)
        if nan:
            assert lo == hi == NAN
        else:
            assert {lo, hi} == {x, y}
            assert not sf.f32_lt_quiet(_sf(hi), _sf(lo))
            if (x | y) & 0x7FFFFFFF == 0 and x != y:  # -0 and +0
                assert lo == 0x80000000 and hi == 0
    # ftz: subnormals compare like zeros
    assert g.eq(0x00000001, 0x80000000, ftz=True) and not g.eq(0x00000001, 0x80000000)
    assert g.fmin(0x00000001, 0x3F800000, ftz=True) == 0


def test_sign_ops_and_scalars():
    assert g.neg(0x3F800000) == 0xBF800000 and g.fabs(0xFF800001) == 0x7F800001
    assert g.add(0x3F800000, 0x3F800000) == 0x40000000
    assert isinstance(g.add(1, 2), int) and isinstance(g.lt(1, 2), bool)
    assert g.add([1, 2], 1).dtype == np.uint32
    assert g.sub(0x3F800000, 0x3F800000) == 0  # x - x = +0
    assert g.add(0x80000000, 0x80000000) == 0x80000000  # -0 + -0 = -0
    assert g.mul(0x1A000000, 0x1A000000) == 0  # 2**-150 ties to even (0)
    assert g.mul(0x1A000001, 0x1A000000) == 1
    assert g.mul(0x00800000, 0x3F000000, ftz=True) == 0  # result subnormal, flushed
    assert g.mul(0x00FFFFFF, 0x3F000000) == 0x00800000  # rounds up to min normal
    assert g.mul(0x00FFFFFF, 0x3F000000, ftz=True) == 0x00800000
    assert g.add(0x7F7FFFFF, 0x7F7FFFFF) == 0x7F800000
    assert g.fma(0x3F800000, 0x7F800000, 0xFF800000) == NAN
