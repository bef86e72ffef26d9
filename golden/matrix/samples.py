"""Random and targeted inputs for matrix dot products (tests, the registry, the experiment).

:func:`random_elements` draws element patterns of a format in several modes; :func:`targeted`
builds FTTN-style feature-targeted dot products (Li et al., "FTTN: Feature-Targeted Testing for
Numerical Properties of NVIDIA & AMD Matrix Accelerators", arXiv 2403.00232): inputs whose
result tells whether subnormals are kept, how many bits survive alignment, how the result is
rounded, how many products are fused before a rounding, and how zeros, infinities and NaNs
come out.
"""

import numpy as np

from .formats import fmt, round_to

__all__ = ["random_elements", "encode", "targeted", "TARGETED_CASES"]


def encode(values, format):
    """Patterns of float64 ``values`` rounded (RNE) to ``format`` (an IEEE-style format, or FP8
    of either kind: values must then be exactly representable and finite)."""
    f = fmt(format)
    values = np.asarray(values, np.float64)
    sign = np.signbit(values).astype(np.int64)
    m, e = np.frexp(np.abs(values))
    mag = (m * 2.0**53).astype(np.int64)
    scale = e.astype(np.int64) - 53
    if f.kind == "ieee":
        out = round_to(sign, mag, scale, f)
        nan_bits = ((1 << f.exp_bits) - 1) << f.man_bits | 1 << (f.man_bits - 1)
        inf_bits = ((1 << f.exp_bits) - 1) << f.man_bits
        out = np.where(np.isinf(values), (sign << (f.bits - 1)) | inf_bits, out)
        return np.where(np.isnan(values), nan_bits, out)
    # FP8 without infinities: round through a wider IEEE-style format of the same layout
    wide = type(f)(f.name + "_ieee", f.exp_bits, f.man_bits, f.bias)
    out = round_to(sign, mag, scale, wide)
    if f.kind == "fnuz":
        out = np.where(out == 1 << (f.bits - 1), 0, out)  # no negative zero
    return out


def random_elements(rng, format, shape, mode="normal", *, special=0.01, span=None):
    """Random element patterns of ``format``.

    ``mode``: ``"bits"`` (uniform patterns), ``"normal"`` (random sign and significand, exponents
    over ``span`` = (lo, hi) or the whole normal range, subnormals and zeros now and then, and a
    fraction ``special`` of NaN / infinity / extreme patterns), ``"int"`` (uniform integers of the
    format's width).
    """
    f = fmt(format)
    shape = tuple(np.atleast_1d(shape))
    if mode in ("bits", "int") or not f.is_float:
        return rng.integers(0, 1 << f.bits, shape, dtype=np.int64)
    lo, hi = span if span is not None else (1, (1 << f.exp_bits) - 2)
    field = rng.integers(lo, hi + 1, shape)
    man = rng.integers(0, 1 << f.man_bits, shape)
    sign = rng.integers(0, 2, shape)
    pick = rng.random(shape)
    field = np.where(pick < 0.04, 0, field)  # subnormals and zeros
    man = np.where(pick < 0.01, 0, man)
    bits = (sign << (f.bits - 1)) | (field << f.man_bits) | man
    raw = rng.integers(0, 1 << f.bits, shape, dtype=np.int64)
    return np.where(
        rng.random(shape) < special, raw | (((1 << f.exp_bits) - 1) << f.man_bits), bits
    )


#: Names of the targeted cases, in the order :func:`targeted` returns them.
TARGETED_CASES = (
    "subnormal_products",
    "extra_bits_1",
    "extra_bits_2",
    "extra_bits_3",
    "extra_bits_4",
    "tie_to_even",
    "tie_plus_sticky",
    "below_half_negative",
    "fused_small_terms",
    "cancel_then_small",
    "c_dominates",
    "products_dominate",
    "zero_signs",
    "inf_plus_finite",
    "inf_minus_inf",
    "zero_times_inf",
    "nan_in_c",
    "overflow",
)


def _pow2_pair(e, fa, fb):
    """(x, y) powers of two in formats ``fa``, ``fb`` with ``x * y == 2**e`` (float64s)."""
    lo_a, hi_a = fa.emin - fa.man_bits, (1 << fa.exp_bits) - 2 - fa.bias
    lo_b, hi_b = fb.emin - fb.man_bits, (1 << fb.exp_bits) - 2 - fb.bias
    p = int(np.clip(e - (e // 2), lo_a, hi_a))
    q = e - p
    if q < lo_b:
        p, q = p - (lo_b - q), lo_b
    if q > hi_b:
        p, q = p + (q - hi_b), hi_b
    if not (lo_a <= p <= hi_a and lo_b <= q <= hi_b):
        return None
    return 2.0**p, 2.0**q


def targeted(a_fmt, b_fmt, c_fmt, k, *, fp8="ocp"):
    """``(names, a, b, c)``: FTTN-style dot products of depth ``k``: element patterns ``a``,
    ``b`` of shape (n, k) and ``c`` (n,). Cases a format cannot express are left out."""

    def f_of(name):
        if name in ("fp8", "bf8") and fp8 == "fnuz":
            return fmt(name + "_fnuz")
        return fmt(name)

    fa, fb, fc = f_of(a_fmt), f_of(b_fmt), fmt(c_fmt)
    ulp_e = -fc.man_bits  # ulp of the output at 1.0 is 2**ulp_e
    cases = []

    def add(name, pairs, c):
        a = np.zeros(k)
        b = np.zeros(k)
        for i, (x, y) in enumerate(pairs):
            a[i], b[i] = x, y
        cases.append((name, a, b, c))

    def p2(e):
        return _pow2_pair(e, fa, fb)

    # scale every case by 2**s so that products 2**-13 ulp below C stay representable
    lo = fa.emin - fa.man_bits + fb.emin - fb.man_bits
    s = max(0, lo + 13 - ulp_e)
    sub = (2.0 ** (fa.emin - fa.man_bits), 1.0)
    add("subnormal_products", [sub] * 2, 0.0)
    for j in range(1, 5):
        pair = p2(s + ulp_e - j)
        if pair is not None:
            add(f"extra_bits_{j}", [pair], 2.0**s)
    half = p2(s + ulp_e - 1)
    tiny = p2(s + ulp_e - 12)
    if half is not None:
        add("tie_to_even", [half], 2.0**s)
        if tiny is not None:
            add("tie_plus_sticky", [half, tiny], 2.0**s)
            add("below_half_negative", [(-tiny[0], tiny[1])], 2.0**s)
    t = max(0, lo - ulp_e + 2)  # products 2**t and 2**(t + ulp_e - 2) both representable
    one, small = p2(t), p2(t + ulp_e - 2)
    if one is not None and small is not None:
        add("fused_small_terms", [one] + [small] * (min(k, 8) - 1), 0.0)
        big = p2(t + 4)
        if big is not None:
            add("cancel_then_small", [big, (-big[0], big[1]), small], 0.0)
    if one is not None:
        add("c_dominates", [one] * 2, 2.0 ** (t + 30))
        add("products_dominate", [p2(t + 6) or one] * 2, 2.0 ** (t - 20))
        add("zero_signs", [(-0.0, 1.0), (0.0, -1.0)], -0.0)
    inf_a = np.inf if fa.kind == "ieee" else None
    if inf_a is not None and one is not None:
        add("inf_plus_finite", [(inf_a, 1.0), one], 1.0)
        add("inf_minus_inf", [(inf_a, 1.0), (-inf_a, 1.0)], 0.0)
        add("zero_times_inf", [(inf_a, 0.0)], 1.0)
    if one is not None:
        add("nan_in_c", [one], np.nan)
    big_a = 2.0 ** ((1 << fa.exp_bits) - 2 - fa.bias)
    big_b = 2.0 ** ((1 << fb.exp_bits) - 2 - fb.bias)
    add("overflow", [(big_a, big_b)] * k, 2.0 ** (fc.bias))
    names = [c[0] for c in cases]
    a = np.stack([encode(c[1], fa) for c in cases])
    b = np.stack([encode(c[2], fb) for c in cases])
    c = encode(np.array([c[3] for c in cases]), fc)
    return names, a, b, c
