"""Element formats of the matrix instructions: decoding bit patterns and rounding to a format.

Everything works on numpy arrays of bit patterns (any integer dtype) and is vectorised.

:func:`decode` splits a pattern into sign, significand and exponent so that a finite value is
``(-1)**sign * sig * 2**(exp - man_bits)``: ``sig`` holds the hidden bit for normal numbers, and
subnormal numbers (and zeros) get the smallest normal exponent ``emin``, so the exponent is
that of the leading bit position, as MMA-Sim's ``frexp_and_normalize`` defines it. The FP8 kinds
follow :class:`gpurtl.facts.matrix.FloatFormat`.

:func:`round_to` rounds ``(-1)**sign * mag * 2**scale`` (``mag`` a non-negative integer) to a
format with round to nearest even or toward zero, subnormal results kept or flushed, overflow to
infinity (RNE) or to the largest finite number (toward zero).
"""

import numpy as np

from gpurtl.facts.matrix import FORMATS

__all__ = ["Decoded", "decode", "to_float", "round_to", "fmt", "int_value"]


def fmt(name_or_format):
    """The :class:`~gpurtl.facts.matrix.FloatFormat` / ``IntFormat`` named (or given)."""
    if isinstance(name_or_format, str):
        try:
            return FORMATS[name_or_format]
        except KeyError:
            raise ValueError(
                f"format must be one of {', '.join(FORMATS)}, not {name_or_format!r}"
            ) from None
    return name_or_format


class Decoded:
    """Fields of decoded float patterns (numpy arrays of one shape).

    ``sign`` (0/1), ``sig`` (int64, with the hidden bit), ``exp`` (int64, leading-bit exponent
    clamped at ``emin``), ``nan``, ``inf``, ``zero`` (bool).
    """

    __slots__ = ("sign", "sig", "exp", "nan", "inf", "zero")

    def __init__(self, sign, sig, exp, nan, inf, zero):
        self.sign, self.sig, self.exp = sign, sig, exp
        self.nan, self.inf, self.zero = nan, inf, zero


def decode(bits, format, *, ftz=False):
    """Decode float bit patterns of ``format``; ``ftz`` reads subnormal inputs as signed zeros."""
    f = fmt(format)
    bits = np.asarray(bits).astype(np.int64) & ((1 << f.bits) - 1)
    man_mask = (1 << f.man_bits) - 1
    exp_max = (1 << f.exp_bits) - 1
    sign = (bits >> (f.bits - 1)) & 1
    field = (bits >> f.man_bits) & exp_max
    man = bits & man_mask
    if f.kind == "ieee":
        nan = (field == exp_max) & (man != 0)
        inf = (field == exp_max) & (man == 0)
    elif f.kind == "fn":
        nan = (field == exp_max) & (man == man_mask)
        inf = np.zeros(bits.shape, bool)
    else:  # fnuz: the negative-zero pattern is the NaN
        nan = bits == (1 << (f.bits - 1))
        inf = np.zeros(bits.shape, bool)
    sub = field == 0
    if ftz:
        man = np.where(sub, 0, man)
    sig = np.where(sub, man, man | (1 << f.man_bits))
    exp = np.where(sub, f.emin, field - f.bias)
    zero = sig == 0
    special = nan | inf
    sig = np.where(special, 0, sig)
    return Decoded(sign, sig, exp, nan, inf, zero & ~special)


def to_float(bits, format):
    """float64 values of float patterns (NaN, +-inf and signed zeros included)."""
    f = fmt(format)
    d = decode(bits, f)
    value = np.ldexp(d.sig.astype(np.float64), (d.exp - f.man_bits).astype(np.int64))
    value = np.where(d.inf, np.inf, value)
    value = np.where(d.sign == 1, -value, value)
    return np.where(d.nan, np.nan, value)


def int_value(bits, width, signed):
    """Integer values of ``width``-bit patterns, two's complement where ``signed`` (array ok)."""
    bits = np.asarray(bits).astype(np.int64) & ((1 << width) - 1)
    signed = np.asarray(signed, bool)
    return np.where(signed & (bits >> (width - 1) == 1), bits - (1 << width), bits)


def _msb(values):
    """Index of the leading one of each positive int64 (-1 for 0)."""
    values = np.asarray(values, np.int64)
    out = np.full(values.shape, -1, np.int64)
    v = values.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        big = v >= (np.int64(1) << shift)
        out = np.where(big, out + shift, out)
        v = np.where(big, v >> shift, v)
    return np.where(values > 0, out + 1, -1)


def round_to(sign, mag, scale, format, *, mode="rne", ftz=False):
    """Bit patterns of ``(-1)**sign * mag * 2**scale`` rounded to the IEEE-style ``format``.

    ``mag`` is a non-negative int64 below 2**62, ``scale`` an int64 array. ``mode`` is ``"rne"``
    (ties to even; overflow to infinity) or ``"rz"`` (toward zero; overflow to the largest finite
    number). ``ftz`` flushes results that are subnormal after rounding to signed zero. A zero
    ``mag`` gives the zero of ``sign``.
    """
    f = fmt(format)
    if f.kind != "ieee":
        raise ValueError(f"results are rounded to IEEE-style formats only, not {f.name}")
    sign = np.asarray(sign, np.int64)
    mag = np.asarray(mag, np.int64)
    scale = np.asarray(scale, np.int64)
    lead = _msb(mag)
    e_res = np.maximum(lead + scale, f.emin)  # leading-bit exponent, clamped for subnormals
    drop = (e_res - f.man_bits) - scale  # low bits of mag below the result's last place
    gone = drop > 62  # every bit is below half an ulp (mag < 2**62)
    d = np.clip(drop, 1, 62)
    kept = np.where(drop > 0, mag >> d, mag << np.clip(-drop, 0, 62))
    kept = np.where(gone, 0, kept)
    if mode == "rne":
        half = np.int64(1) << (d - 1)
        rem = mag & ((np.int64(1) << d) - 1)
        up = (drop > 0) & ~gone & ((rem > half) | ((rem == half) & ((kept & 1) == 1)))
        kept = kept + up.astype(np.int64)
    elif mode != "rz":
        raise ValueError(f"`mode` must be 'rne' or 'rz', not {mode!r}")
    carry = kept >= (np.int64(1) << (f.man_bits + 1))  # rounding carried out of the significand
    kept = np.where(carry, kept >> 1, kept)
    e_res = np.where(carry, e_res + 1, e_res)
    normal = kept >= (np.int64(1) << f.man_bits)
    field = np.where(normal, e_res + f.bias, 0)
    body = (field << f.man_bits) | (kept & ((1 << f.man_bits) - 1))
    if ftz:
        body = np.where(normal, body, 0)
    max_field = (1 << f.exp_bits) - 1
    inf_bits = max_field << f.man_bits
    overflow = field >= max_field
    body = np.where(overflow, inf_bits if mode == "rne" else inf_bits - 1, body)
    body = np.where(mag == 0, 0, body)
    return (sign << (f.bits - 1)) | body
