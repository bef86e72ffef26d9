"""The arithmetic of one output element of a matrix instruction, as a named, parametrised algorithm.

No vendor documents how its matrix units add. MMA-Sim (Microsoft Research, "MMA-Sim: Bit-Accurate
Reference Model of Tensor Cores and Matrix Cores", arXiv 2511.10909) describes each NVIDIA and AMD
matrix unit it measured as a small algorithm over a few parameters; :class:`Algorithm` is that
description, and :func:`dot` evaluates it on bit patterns, with integer arithmetic only.

A floating-point output element is ``D = C + sum_k A[k] * B[k]`` computed in **steps** of ``group``
products (the products of one step are fused; the running value is rounded to the output format
after every step and is the next step's ``C``). One step, with ``F = frac_bits`` and
``F2 = sum_bits``:

1. Every product is exact: ``sig_a * sig_b`` with exponent ``e = e_a + e_b`` (the exponents of the
   operands' leading-bit positions, subnormals at the format's smallest normal exponent). In the
   ``"tr"`` structure a product of ``2**128`` or more becomes an infinity of its sign
   (``overflow_inf``). Zero products take no part in what follows.
2. Fused sum: each product is aligned to the largest exponent ``e_max`` of the step and **truncated
   toward zero** to ``F`` bits after that position; the truncated terms are added exactly. The
   ``"gtr"`` structure does this separately for the even- and odd-numbered products and then
   adds the two sums, each aligned to the larger of their exponents and **floored** (toward minus
   infinity) to ``F`` bits.
3. Accumulate: with ``e_big = max(e_max, e_C)``, the sum is floored to ``F2 + 1`` bits after
   ``e_big`` and ``C`` to ``F`` bits; they are added exactly. ``"gtr"`` drops ``C`` entirely when
   ``e_C < e_big - F - 1`` (``c_drop``).
4. The total is normalised (its leading bit at exponent ``e``, not below -126), **floored** to
   ``F2`` bits after it, and rounded to the output format with ``rounding`` (``"rne"``: to
   nearest, ties to even; ``"rz"``: toward zero), subnormal results kept unless ``ftz_out``.

Zero results: an exact zero total is ``+0``; a non-zero total that rounds to zero keeps its sign.
Special values: a NaN operand, ``0 * inf``, infinite products of both signs, or an infinite sum
meeting an infinite ``C`` of the other sign give the NaN pattern ``nan``; otherwise an infinite
product or ``C`` gives that infinity. As in MMA-Sim, the exponent of an infinite or NaN operand
counts as -1 in ``e_max`` and ``e_C`` (which matters only for ``c_drop``: a NaN or infinite ``C``
is dropped when the products are large enough). ``ftz_in`` reads subnormal A, B and C as zeros.

Integer elements (IU8 / IU4 with I32 accumulation) are exact: each step adds its exact dot
product to the running value, which then wraps modulo 2**32, or saturates to the int32 range
when the instruction's ``clamp`` bit is set (per step: the accumulator between steps is 32 bits).
"""

import numpy as np

from gpurtl.facts.matrix import Algorithm

from .formats import decode, fmt, int_value, round_to

__all__ = ["Algorithm", "dot", "int_dot", "nan_pattern", "NO_EXP"]

#: Exponent given to zero products (below every real exponent).
NO_EXP = -10_000
#: Exponent of the leading bit below which the normalised total is not shifted (FP32's emin).
NORM_EMIN = -126


def nan_pattern(alg, out_format):
    """NaN bit pattern of ``alg`` for results of ``out_format`` (f32, f16 or bf16).

    MMA-Sim's all-ones FP32 NaN (0x7FFFFFFF) maps to all ones; a canonical quiet NaN maps to the
    format's canonical quiet NaN.
    """
    f = fmt(out_format)
    if f.name == "f32":
        return alg.nan
    ones = alg.nan == 0x7FFFFFFF
    body = (1 << (f.bits - 1)) - 1
    return body if ones else ((1 << f.exp_bits) - 1) << f.man_bits | 1 << (f.man_bits - 1)


def _shift(value, amount):
    """``floor(value * 2**amount)`` for int64 arrays (left shifts are exact)."""
    left = np.clip(amount, 0, 62)
    right = np.clip(-amount, 0, 63)
    return np.where(amount >= 0, value << left, value >> right)


def _trunc_shift(mag, amount):
    """``trunc(mag * 2**amount)`` for non-negative int64 ``mag``."""
    left = np.clip(amount, 0, 62)
    right = np.clip(-amount, 0, 63)
    return np.where(amount >= 0, mag << left, mag >> right)


def _msb(values):
    from .formats import _msb as msb

    return msb(values)


def _fused(sig, exp, sign, live, F, man_sum):
    """Truncated fused sum of products (last axis): int64 sum in units ``2**-F`` at ``e_max``.

    ``live`` marks the products that take part; returns ``(sum, e_max)`` with ``e_max = NO_EXP``
    where none does.
    """
    e = np.where(live, exp, NO_EXP)
    e_max = e.max(axis=-1)
    amount = F - man_sum - (e_max[..., None] - e)
    term = _trunc_shift(np.where(live, sig, 0), amount)
    term = np.where(sign == 1, -term, term)
    return term.sum(axis=-1), e_max


def dot(alg, a_bits, b_bits, c_bits, a_fmt, b_fmt, c_fmt):
    """Output bit patterns of ``C + A . B`` under ``alg``.

    ``a_bits``, ``b_bits``: (..., K) patterns of the element formats ``a_fmt``/``b_fmt`` (names:
    ``f16``, ``bf16``, ``fp8``, ``bf8``; FP8 encodings follow ``alg.fp8``); ``c_bits``: (...)
    patterns of ``c_fmt`` (``f32``, ``f16``, ``bf16``), which is also the output format. ``K``
    must be a multiple of ``alg.group``.
    """
    a_bits = np.asarray(a_bits, np.int64)
    b_bits = np.asarray(b_bits, np.int64)
    c = np.asarray(c_bits, np.int64)
    K = a_bits.shape[-1]
    L = alg.group
    if K % L:
        raise ValueError(f"K = {K} is not a multiple of the algorithm's group {L}")
    fa, fb, fc = alg.element_format(a_fmt), alg.element_format(b_fmt), fmt(c_fmt)
    for step in range(0, K, L):
        c = _step(alg, a_bits[..., step : step + L], b_bits[..., step : step + L], c, fa, fb, fc)
    return c


def _step(alg, a_bits, b_bits, c_bits, fa, fb, fc):
    F, F2 = alg.frac_bits, alg.sum_bits
    da = decode(a_bits, fa, ftz=alg.ftz_in)
    db = decode(b_bits, fb, ftz=alg.ftz_in)
    dc = decode(c_bits, fc, ftz=alg.ftz_in)
    man_sum = fa.man_bits + fb.man_bits
    sign = da.sign ^ db.sign
    sig = da.sig * db.sig
    a_spec, b_spec = da.nan | da.inf, db.nan | db.inf
    exp = np.where(a_spec, -1, da.exp) + np.where(b_spec, -1, db.exp)
    nan_p = da.nan | db.nan | (da.inf & db.zero) | (da.zero & db.inf)
    inf_p = (da.inf | db.inf) & ~nan_p
    if alg.overflow_inf and alg.structure == "tr":
        over = (sig > 0) & (_msb(sig) - man_sum + exp >= 128)
        inf_p |= over
    special_p = nan_p | inf_p
    live = (sig > 0) | special_p  # products that set the exponent
    finite = sig > 0
    e_c = np.where(dc.nan | dc.inf, -1, dc.exp)

    if alg.structure == "tr":
        e_all = np.where(live, exp, NO_EXP).max(axis=-1)
        amount = F - man_sum - (e_all[..., None] - exp)
        term = _trunc_shift(np.where(finite & ~special_p, sig, 0), amount)
        s_dot = np.where(sign == 1, -term, term).sum(axis=-1)
        e_dot = e_all
    else:
        halves = []
        for part in (slice(0, None, 2), slice(1, None, 2)):
            p_live = live[..., part]
            e_h = np.where(p_live, exp[..., part], NO_EXP).max(axis=-1)
            amount = F - man_sum - (e_h[..., None] - exp[..., part])
            use = (finite & ~special_p)[..., part]
            term = _trunc_shift(np.where(use, sig[..., part], 0), amount)
            halves.append((np.where(sign[..., part] == 1, -term, term).sum(axis=-1), e_h))
        e_dot = np.maximum(halves[0][1], halves[1][1])
        s_dot = sum(_shift(s, -(e_dot - e_h)) for s, e_h in halves)

    e_big = np.maximum(e_dot, e_c)
    dot_al = _shift(s_dot, (F2 + 1 - F) - (e_big - e_dot))
    c_signed = np.where(dc.sign == 1, -dc.sig, dc.sig)
    c_al = _shift(_shift(c_signed, F - fc.man_bits - (e_big - e_c)), F2 + 1 - F)
    c_gone = np.zeros(e_c.shape, bool)
    if alg.c_drop:
        c_gone = e_c < e_big - F - 1
        c_al = np.where(c_gone, 0, c_al)
    total = dot_al + c_al

    mag_t = np.abs(total)
    p = _msb(mag_t)
    e_norm = np.maximum(p + e_big - (F2 + 1), NORM_EMIN)
    r = _shift(total, e_big - 1 - e_norm)
    out = round_to(
        (r < 0).astype(np.int64),
        np.abs(r),
        e_norm - F2,
        fc,
        mode=alg.rounding,
        ftz=alg.ftz_out,
    )
    out = np.where(total == 0, 0, out)

    # special values
    c_nan = dc.nan & ~c_gone
    c_inf = dc.inf & ~c_gone
    pos_inf = (inf_p & (sign == 0)).any(axis=-1)
    neg_inf = (inf_p & (sign == 1)).any(axis=-1)
    any_nan = nan_p.any(axis=-1) | (pos_inf & neg_inf) | c_nan
    sum_inf = pos_inf | neg_inf
    sum_sign = neg_inf.astype(np.int64)
    any_nan |= sum_inf & c_inf & (dc.sign != sum_sign)
    inf_bits = ((1 << fc.exp_bits) - 1) << fc.man_bits
    out = np.where(c_inf, (dc.sign << (fc.bits - 1)) | inf_bits, out)
    out = np.where(sum_inf, (sum_sign << (fc.bits - 1)) | inf_bits, out)
    out = np.where(any_nan, nan_pattern(alg, fc), out)
    return out.astype(np.int64)


def int_dot(a_bits, b_bits, c_bits, a_width, b_width, a_signed, b_signed, clamp, group):
    """Integer ``C + A . B``: (..., K) patterns of ``a_width``/``b_width`` bits, int32 ``C``
    patterns; ``a_signed``, ``b_signed``, ``clamp`` broadcast against ``c_bits``. Steps of
    ``group`` products; after each the value wraps to 32 bits or (``clamp``) saturates."""
    a = int_value(a_bits, a_width, np.asarray(a_signed)[..., None])
    b = int_value(b_bits, b_width, np.asarray(b_signed)[..., None])
    acc = int_value(c_bits, 32, True)
    clamp = np.asarray(clamp, bool)
    K = a.shape[-1]
    if K % group:
        raise ValueError(f"K = {K} is not a multiple of the group {group}")
    for step in range(0, K, group):
        acc = acc + (a[..., step : step + group] * b[..., step : step + group]).sum(axis=-1)
        sat = np.clip(acc, -(1 << 31), (1 << 31) - 1)
        wrapped = int_value(acc, 32, True)
        acc = np.where(clamp, sat, wrapped)
    return acc & 0xFFFFFFFF
