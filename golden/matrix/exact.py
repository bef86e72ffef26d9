"""Exact-rational reference of ``C + A . B`` and the error of a rounded result against it.

Uses :class:`fractions.Fraction`, independent of the integer datapath in :mod:`.arith`: every
finite element is a dyadic rational, so the exact dot product is a Fraction; the error of a
result is measured in units in the last place (ulp) of the output format at the exact value.
"""

import math
from fractions import Fraction

import numpy as np

from .formats import decode, fmt

__all__ = ["value", "exact_dot", "ulp_error", "round_exact"]


def value(bits, format):
    """The exact value of one pattern (a Fraction), or ``None`` for NaN / infinity."""
    f = fmt(format)
    d = decode(np.array([bits]), f)
    if d.nan[0] or d.inf[0]:
        return None
    v = Fraction(int(d.sig[0])) * Fraction(2) ** (int(d.exp[0]) - f.man_bits)
    return -v if d.sign[0] else v


def exact_dot(a_bits, b_bits, c_bits, a_fmt, b_fmt, c_fmt):
    """Exact ``c + sum(a * b)`` of 1-D pattern sequences; ``None`` if any input is not finite."""
    total = value(int(c_bits), c_fmt)
    if total is None:
        return None
    for x, y in zip(a_bits, b_bits):
        vx, vy = value(int(x), a_fmt), value(int(y), b_fmt)
        if vx is None or vy is None:
            return None
        total += vx * vy
    return total


def _ulp(x, format):
    """ulp of the output format at the exact value ``x`` (the subnormal ulp below emin)."""
    f = fmt(format)
    if x == 0:
        e = f.emin
    else:
        e = max(math.floor(math.log2(abs(x))), f.emin)
        # log2 of a Fraction can be off by one near powers of two: correct it exactly
        while Fraction(2) ** e > abs(x) and e > f.emin:
            e -= 1
        while Fraction(2) ** (e + 1) <= abs(x):
            e += 1
    return Fraction(2) ** (e - f.man_bits)


def ulp_error(result_bits, exact, format):
    """``|result - exact|`` in ulps of ``format`` at ``exact`` (a float); ``inf`` when the result
    is not finite but the exact value is, ``None`` when ``exact`` is ``None``."""
    if exact is None:
        return None
    r = value(int(result_bits), format)
    if r is None:
        return math.inf
    return float(abs(r - exact) / _ulp(exact, format))


def round_exact(exact, format):
    """The correctly rounded (nearest even) pattern of the Fraction ``exact`` (finite only)."""
    f = fmt(format)
    if exact == 0:
        return 0
    sign = 1 if exact < 0 else 0
    x = abs(exact)
    ulp = _ulp(x, f)
    q = x / ulp
    n = math.floor(q)
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    # n * ulp with n up to 2**(man+1): re-encode
    e = int(math.log2(ulp)) + f.man_bits
    if n >= 1 << (f.man_bits + 1):
        n >>= 1
        e += 1
    if e > (1 << f.exp_bits) - 2 - f.bias:
        return (sign << (f.bits - 1)) | (((1 << f.exp_bits) - 1) << f.man_bits)
    field = e + f.bias if n >= 1 << f.man_bits else 0
    return (sign << (f.bits - 1)) | (field << f.man_bits) | (n & ((1 << f.man_bits) - 1))
