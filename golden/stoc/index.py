"""Barycentric (u, v) to micro-triangle index, bit-exact in fixed point.

Source: the Vulkan specification (KhronosGroup/Vulkan-Docs, ``chapters/raytraversal.adoc``
"Ray Opacity Micromap" and the reference algorithm in ``appendices/VK_EXT_opacity_micromap.adoc``),
re-expressed.

Order of micro-triangles ("bird curve"): at every subdivision step the four children of a
triangle with ordered corners (P0, P1, P2) are 0: near P0, 1: middle (flipped), 2: near P1,
3: near P2 (flipped). ``u`` is the weight of vertex 1, ``v`` the weight of vertex 2.

Fixed point (a project choice; the hardware's precision is not public):
the FP32 barycentric is clamped to [0, 1] and truncated to an unsigned fixed-point number with
``frac_bits`` fraction bits (1.0 = ``1 << frac_bits``). NaN (either sign) and every negative value
(including -0 and -inf) give 0; values >= 1.0 and +inf give 1.0; subnormals give 0. Truncation
keeps ``floor(u * 2**level)`` exact for ``level <= frac_bits``, so only the in-cell diagonal test
sees the quantization (a point within ``2**-frac_bits`` of a cell diagonal is judged on its
truncated coordinates).

Index at level ``L`` (the Vulkan reference algorithm's steps, integer form): ``N = 2**L``,
``iu = floor(u N)``, ``iv = floor(v N)`` with fractions ``uf``, ``vf``; clamp ``iu``, ``iv`` to
``N - 1``; if ``iu + iv >= N`` lower ``iu`` to ``N - 1 - iv``; ``iw = N - 1 - iu - iv``, minus one
when ``uf + vf >= 1`` and the clamped ``iu + iv < N - 1`` (the point is in the inverted triangle of
its grid cell); then the bit-parallel conversion of (iu, iv, iw) to the curve index.
"""

import numpy as np

from gpurtl.facts.fp32 import f32_bits
from gpurtl.facts.stoc import MAX_LEVEL

__all__ = [
    "MAX_LEVEL",
    "f32_to_fixed",
    "grid_coords",
    "dbary_to_index",
    "index_fixed",
    "bary_to_index",
    "index_state_bits",
]


def _check_frac_bits(frac_bits):
    if not isinstance(frac_bits, int) or not MAX_LEVEL <= frac_bits <= 24:
        raise ValueError(
            f"`frac_bits` must be an integer from {MAX_LEVEL} to 24, not {frac_bits!r}"
        )


def _check_level(level):
    if not isinstance(level, (int, np.integer)) or not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"`level` must be an integer from 0 to {MAX_LEVEL}, not {level!r}")


def _scalar_or_array(value, like):
    return int(value) if np.ndim(like) == 0 else value


def f32_to_fixed(bits, frac_bits=24):
    """Fixed-point value (``1.0 = 1 << frac_bits``) of FP32 bit patterns, by bit manipulation.

    See the module doc string for clamping and NaN handling. Accepts an int or an array of
    uint32 patterns; returns the same kind (int64 arrays).
    """
    _check_frac_bits(frac_bits)
    raw = np.asarray(bits, dtype=np.int64) & 0xFFFFFFFF
    sign = raw >> 31
    exp = (raw >> 23) & 0xFF
    frac = raw & 0x7FFFFF
    mantissa = np.where(exp > 0, frac | (1 << 23), frac)
    # value = mantissa * 2**(max(exp, 1) - 150); times 2**frac_bits is a right shift for < 1.0
    shift = 150 - frac_bits - np.maximum(exp, 1)
    below_one = mantissa >> np.clip(shift, 0, 63)
    one = 1 << frac_bits
    result = np.where(exp >= 127, one, below_one)  # >= 1.0, +inf, and NaN (fixed below)
    result = np.where((exp == 255) & (frac != 0), 0, result)  # NaN -> 0
    result = np.where(sign == 1, 0, result)  # negative (and -NaN) -> 0
    return _scalar_or_array(result, bits)


def grid_coords(U, V, level, frac_bits=24):
    """The Vulkan reference algorithm's steps 1-3 on fixed-point (U, V).

    Returns ``(iu, iv, iw)`` arrays (int64)."""
    _check_frac_bits(frac_bits)
    _check_level(level)
    U = np.asarray(U, dtype=np.int64)
    V = np.asarray(V, dtype=np.int64)
    n = 1 << level
    shift = frac_bits - level
    fraction_mask = (1 << shift) - 1
    iu = np.minimum(U >> shift, n - 1)
    iv = np.minimum(V >> shift, n - 1)
    uf, vf = U & fraction_mask, V & fraction_mask
    s = iu + iv
    inverted = ((uf + vf) >= (1 << shift)) & (s < n - 1)
    iu = np.where(s >= n, n - 1 - iv, iu)
    iw = (~(iu + iv) & (n - 1)) - inverted.astype(np.int64)
    return iu, iv, iw


def _suffix_xor(t):
    # bit k of the result = XOR of the bits >= k of t (enough for 16-bit coordinates)
    for step in (1, 2, 4, 8):
        t = t ^ (t >> step)
    return t


def _interleave(even, odd, level):
    index = np.zeros_like(even)
    for k in range(level):
        index |= ((even >> k) & 1) << (2 * k)
        index |= ((odd >> k) & 1) << (2 * k + 1)
    return index


def dbary_to_index(iu, iv, iw, level):
    """Spec step 4-5: discrete barycentrics (iu, iv, iw) to the curve index (bit-parallel)."""
    _check_level(level)
    iu, iv, iw = (np.asarray(x, dtype=np.int64) for x in (iu, iv, iw))
    mask = (1 << level) - 1
    b0 = ~(iu ^ iw) & mask
    t = (iu ^ iv) & b0
    f = _suffix_xor(t)
    b1 = (((f ^ iu) & ~b0) | t) & mask
    return _interleave(b0, b1, level)


def index_fixed(U, V, level, frac_bits=24):
    """Micro-triangle index at ``level`` of fixed-point barycentrics (ints or arrays)."""
    result = dbary_to_index(*grid_coords(U, V, level, frac_bits), level)
    return _scalar_or_array(result, U)


def bary_to_index(u_bits, v_bits, level, frac_bits=24):
    """Micro-triangle index at ``level`` of FP32 barycentric bit patterns (ints or arrays).

    Python floats are accepted too (converted to FP32, round to nearest).
    """
    if isinstance(u_bits, float):
        u_bits = f32_bits(u_bits)
    if isinstance(v_bits, float):
        v_bits = f32_bits(v_bits)
    U = f32_to_fixed(u_bits, frac_bits)
    V = f32_to_fixed(v_bits, frac_bits)
    return index_fixed(U, V, level, frac_bits)


def index_state_bits(index, bits_per_state):
    """Bit offset of state ``index`` in micromap data packed LSB-first (Vulkan "Ray Opacity
    Micromap")."""
    return np.asarray(index, dtype=np.int64) * bits_per_state
