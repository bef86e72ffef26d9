"""One dot-product step of the matrix core: ``L`` products fused with an accumulator value.

:func:`float_step` builds the ``"tr"`` algorithm of :class:`gpurtl.facts.matrix.Algorithm`
(the golden model is :func:`gpurtl.golden.matrix.arith.dot`), :func:`int_step` the exact integer
step. Both are combinational chains cut into pipeline segments by a
:class:`~gpurtl.hdl.matrix.pipe.Stager` with :data:`FLOAT_CUTS` / :data:`INT_CUTS` boundaries:

1. decode the ``L`` pairs, exact significand products (one multiplier per lane), exponent sums,
   special-value flags;
2. largest exponent, alignment of every product (truncated to ``F`` bits after it), signed sum;
3. accumulator decode and alignment (floored), the two added;
4. normalisation (leading-one search, floored to ``F2`` bits);
5. rounding to the output format, special values, packing.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed
from amaranth.utils import bits_for

from gpurtl.facts.matrix import FORMATS

__all__ = ["FLOAT_CUTS", "INT_CUTS", "float_step", "int_step", "decode", "msb"]

#: Pipeline boundaries of :func:`float_step` (the stages parameter chooses how many register).
FLOAT_CUTS = 5
#: Pipeline boundaries of :func:`int_step`.
INT_CUTS = 2

_EXP = signed(12)
NORM_EMIN = -126


class _Dec:
    __slots__ = ("sign", "exp", "sig", "nan", "inf", "zero")


def decode(bits, f, ftz=False, man=None, m=None, name="d"):
    """Fields of an element of format ``f``: significand with ``man`` fraction bits (default the
    format's; more shifts it left), leading-bit exponent, special flags."""
    man = f.man_bits if man is None else man
    d = _Dec()
    field = bits[f.man_bits : f.man_bits + f.exp_bits]
    frac = bits[: f.man_bits]
    d.sign = bits[f.bits - 1]
    top = (1 << f.exp_bits) - 1
    if f.kind == "ieee":
        d.nan = (field == top) & (frac != 0)
        d.inf = (field == top) & (frac == 0)
    elif f.kind == "fn":
        d.nan = (field == top) & (frac == (1 << f.man_bits) - 1)
        d.inf = Const(0, 1)
    else:
        d.nan = bits[: f.bits] == (1 << (f.bits - 1))
        d.inf = Const(0, 1)
    sub = field == 0
    frac_used = Mux(sub, 0, frac) if ftz else frac
    sig = Mux(sub, frac_used, Cat(frac_used, Const(1, 1)))
    sig = Mux(d.nan | d.inf, 0, sig)
    d.sig = (sig << (man - f.man_bits))[: man + 1]
    d.exp = Mux(sub, Const(f.emin, _EXP), (field.as_unsigned() - f.bias).as_signed())
    d.zero = (sig == 0) & ~d.nan & ~d.inf
    if m is not None:
        for field_name in _Dec.__slots__:
            setattr(d, field_name, _w(m, getattr(d, field_name), f"{name}_{field_name}"))
    return d


def msb(value, width):
    """Index of the leading one of the unsigned ``value`` (0 when ``value`` is 0)."""
    out = Const(0, bits_for(width))
    for i in range(width):
        out = Mux(value[i], i, out)
    return out


def _msb(m, value, width, name):
    """:func:`msb` as a chain of wires (pysim compiles deep ``Mux`` nests into deep Python)."""
    v = _w(m, value, name + "_in")
    out = Const(0, bits_for(width))
    for i in range(width):
        out = Mux(v[i], i, out)
        if i % 8 == 7:
            out = _w(m, out, f"{name}_{i}")
    return _w(m, out, name)


def _w(m, value, name):
    """``value`` through a named combinational wire (keeps expression trees from growing into
    deep shared graphs, which Amaranth walks as trees)."""
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def _shift_floor(x, amount, max_left, max_right):
    """``floor(x * 2**amount)`` for a signed ``x`` and signed ``amount`` (clamped to the range;
    right shifts beyond ``max_right`` give 0 or -1, as floor does)."""
    lw = bits_for(max_left)
    rw = bits_for(max_right)
    left = Mux(amount > max_left, max_left, Mux(amount > 0, amount, 0))[:lw]
    right = Mux(-amount > max_right, max_right, Mux(amount < 0, -amount, 0))[:rw]
    return Mux(amount >= 0, x.as_signed() << left, x.as_signed() >> right)


def float_step(st, alg, a, b, c, a_formats, b_formats, a_sel, b_sel, c_format):
    """Build one step; returns the result bits (output format) after ``st``'s registers.

    ``a``, ``b``: lists of ``L`` element values; ``a_formats``/``b_formats``: one format per value
    of ``a_sel``/``b_sel`` (1-bit selects between two formats of equal width, FP8/BF8) or a
    single format (``a_sel`` ignored); ``c``: accumulator bits in ``c_format``, the output format.
    """
    F, F2 = alg.frac_bits, alg.sum_bits
    fc = FORMATS[c_format]
    man_a = max(f.man_bits for f in a_formats)
    man_b = max(f.man_bits for f in b_formats)
    man_sum = man_a + man_b
    if F < man_sum:
        raise ValueError(f"`frac_bits` must be at least {man_sum} for these formats, not {F}")

    m = st.m

    def dec(bits, formats, sel, man, name):
        ds = [decode(bits, f, alg.ftz_in, man, m, f"{name}_{f.name}") for f in formats]
        if len(ds) == 1:
            return ds[0]
        out = _Dec()
        for field in _Dec.__slots__:
            value = Mux(sel, getattr(ds[1], field), getattr(ds[0], field))
            setattr(out, field, _w(m, value, f"{name}_{field}"))
        return out

    # segment 1: decode and exact products
    lanes = []
    max_exp_in = max(((1 << f.exp_bits) - 2 - f.bias) for f in a_formats) + max(
        ((1 << f.exp_bits) - 2 - f.bias) for f in b_formats
    )
    for j, (x, y) in enumerate(zip(a, b)):
        da = dec(x, a_formats, a_sel, man_a, f"a{j}")
        db = dec(y, b_formats, b_sel, man_b, f"b{j}")
        sig = _w(m, da.sig * db.sig, f"p{j}_sig")
        exp = _w(m, (da.exp + db.exp)[:12].as_signed(), f"p{j}_exp")
        nan = da.nan | db.nan | (da.inf & db.zero) | (da.zero & db.inf)
        inf = (da.inf | db.inf) & ~nan
        if alg.overflow_inf and max_exp_in + 1 >= 128:
            big = sig[man_sum + 1]  # |product significand| >= 2
            over = (sig != 0) & ((exp + big) >= 128)
            inf = inf | (over & ~nan)
        lanes.append((sig, exp, da.sign ^ db.sign, nan, inf))
    s = st.cut(
        sig=[x[0] for x in lanes],
        exp=[x[1] for x in lanes],
        sign=[x[2] for x in lanes],
        nan=[x[3] for x in lanes],
        inf=[x[4] for x in lanes],
        c=c,
    )

    # segment 2: largest exponent, truncated alignment, signed sum
    live = [(sg != 0) & ~n & ~i for sg, n, i in zip(s.sig, s.nan, s.inf)]
    has = Const(0, 1)
    e_max = Const(-(1 << 11), _EXP)
    live = [_w(m, lv, f"live{j}") for j, lv in enumerate(live)]
    for j, (lv, e) in enumerate(zip(live, s.exp)):
        e_max = _w(m, Mux(lv & (~has | (e > e_max)), e, e_max), f"emax{j}")
        has = _w(m, has | lv, f"has{j}")
    width = F + 2  # an aligned product: its 2 integer bits and F fraction bits
    total = Const(0, signed(width + 1 + bits_for(len(lanes))))
    for j, (lv, sg, e, sign) in enumerate(zip(live, s.sig, s.exp, s.sign)):
        d = _w(m, (e_max - e).as_unsigned()[:12], f"dist{j}")
        d = Mux(d > width, width, d)[: bits_for(width)]
        term = _w(m, Mux(lv, ((sg << (F - man_sum)) >> d)[:width], 0), f"term{j}")
        term = Cat(term, Const(0, 1)).as_signed()
        total = _w(m, total + Mux(sign, -term, term), f"sum{j}")
    any_nan = Const(0, 1)
    pos_inf = Const(0, 1)
    neg_inf = Const(0, 1)
    for n, i, sign in zip(s.nan, s.inf, s.sign):
        any_nan = any_nan | n
        pos_inf = pos_inf | (i & ~sign)
        neg_inf = neg_inf | (i & sign)
    s = st.cut(
        total=total, e_max=e_max, has=has, nan=any_nan, pos_inf=pos_inf, neg_inf=neg_inf, c=s.c
    )

    # segment 3: the accumulator, both aligned (floored) and added
    dc = decode(s.c, fc, alg.ftz_in, m=m, name="c")
    e_c = dc.exp
    e_big = _w(m, Mux(s.has & (s.e_max > e_c), s.e_max, e_c), "e_big")
    e_dot = _w(m, Mux(s.has, s.e_max, e_big), "e_dot")
    up = F2 + 1 - F
    dot_width = s.total.shape().width
    dot_amount = _w(m, (up - (e_big - e_dot))[:12].as_signed(), "dot_amount")
    dot_al = _w(m, _shift_floor(s.total, dot_amount, up, dot_width + up + 1), "dot_al")
    c_sig = Cat(dc.sig, Const(0, 1)).as_signed()
    c_signed = _w(m, Mux(dc.sign, -c_sig, c_sig), "c_signed")
    c_amount = _w(m, (F - fc.man_bits - (e_big - e_c))[:12].as_signed(), "c_amount")
    c_al = _shift_floor(c_signed, c_amount, max(F - fc.man_bits, 0), F + fc.man_bits + 2)
    c_al = _w(m, c_al << up, "c_al")
    acc_w = max(dot_width + up, fc.man_bits + 2 + F - fc.man_bits + up) + 2
    acc = Signal(signed(acc_w))
    st.m.d.comb += acc.eq(dot_al + c_al)
    c_nan, c_inf = dc.nan, dc.inf
    sum_inf = s.pos_inf | s.neg_inf
    nan = s.nan | (s.pos_inf & s.neg_inf) | c_nan | (sum_inf & c_inf & (dc.sign != s.neg_inf))
    s = st.cut(
        acc=acc,
        e_big=e_big,
        nan=nan,
        sum_inf=sum_inf,
        sum_sign=s.neg_inf,
        c_inf=c_inf,
        c_sign=dc.sign,
    )

    # segment 4: normalise, floor to F2 bits after the leading one
    mag = _w(m, Mux(s.acc < 0, -s.acc, s.acc).as_unsigned()[:acc_w], "acc_mag")
    p = _msb(m, mag, acc_w, "acc_lead")
    e_lead = (p + s.e_big - (F2 + 1))[:12].as_signed()
    e_norm = _w(m, Mux(e_lead < NORM_EMIN, NORM_EMIN, e_lead)[:12].as_signed(), "e_norm")
    norm_amount = _w(m, (s.e_big - 1 - e_norm)[:12].as_signed(), "norm_amount")
    r_w = F2 + 3
    r = _w(m, _shift_floor(s.acc, norm_amount, F2 + 1, acc_w + 1)[:r_w].as_signed(), "norm")
    s = st.cut(
        r=r,
        e_norm=e_norm,
        zero=s.acc == 0,
        nan=s.nan,
        sum_inf=s.sum_inf,
        sum_sign=s.sum_sign,
        c_inf=s.c_inf,
        c_sign=s.c_sign,
    )

    # segment 5: round to the output format, special values
    sign = _w(m, s.r < 0, "res_sign")
    mw = r_w - 1
    mag = _w(m, Mux(sign, -s.r, s.r).as_unsigned()[:mw], "res_mag")
    lead = _msb(m, mag, mw, "res_lead")
    scale = _w(m, (s.e_norm - F2)[:12].as_signed(), "res_scale")
    e_res = (lead + scale)[:12].as_signed()
    e_res = _w(m, Mux(e_res < fc.emin, fc.emin, e_res)[:12].as_signed(), "res_exp")
    drop = _w(m, (e_res - fc.man_bits - scale)[:12].as_signed(), "res_drop")
    drop_c = Mux(drop > mw + 1, mw + 1, drop)[: bits_for(mw + 1)]
    wide = Cat(Const(0, mw + 1), mag)  # mag with mw+1 zero bits below
    shifted = _w(m, (wide >> drop_c)[: 2 * mw + 1], "res_shifted")
    kept = shifted[mw + 1 :]
    half = shifted[mw]
    sticky = shifted[:mw] != 0
    if alg.rounding == "rne":
        up_ = half & (sticky | kept[0])
    else:
        up_ = Const(0, 1)
    rounded = _w(m, (kept + up_)[: fc.man_bits + 2], "res_rounded")
    carry = rounded[fc.man_bits + 1]
    sig_out = Mux(carry, rounded >> 1, rounded)[: fc.man_bits + 1]
    e_out = Mux(carry, e_res + 1, e_res)[:12].as_signed()
    normal = sig_out[fc.man_bits]
    field = Mux(normal, (e_out + fc.bias)[:12], 0)
    max_field = (1 << fc.exp_bits) - 1
    over = normal & (field >= max_field)
    body = _w(m, Cat(sig_out[: fc.man_bits], field[: fc.exp_bits]), "res_body")
    if alg.ftz_out:
        body = Mux(normal, body, 0)
    inf_body = Const(max_field << fc.man_bits, fc.bits - 1)
    sat = inf_body if alg.rounding == "rne" else Const((max_field << fc.man_bits) - 1, fc.bits - 1)
    body = Mux(over, sat, body)
    result = Cat(body[: fc.bits - 1], sign)
    result = Mux(s.zero, 0, result)
    result = Mux(s.c_inf, Cat(inf_body, s.c_sign), result)
    result = Mux(s.sum_inf, Cat(inf_body, s.sum_sign), result)
    result = Mux(s.nan, _nan_bits(alg, fc), result)
    out = Signal(fc.bits, name="step_result")
    st.m.d.comb += out.eq(result)
    return st.cut(result=out).result


def _nan_bits(alg, fc):
    if fc.name == "f32":
        return Const(alg.nan, 32)
    if alg.nan == 0x7FFFFFFF:
        return Const((1 << (fc.bits - 1)) - 1, fc.bits)
    return Const(((1 << fc.exp_bits) - 1) << fc.man_bits | 1 << (fc.man_bits - 1), fc.bits)


def int_step(st, a, b, c, a_signed, b_signed, clamp):
    """Exact integer step: ``c + sum(a * b)`` wrapped to 32 bits, or saturated when ``clamp``.

    ``a``, ``b``: lists of element values (two's complement where ``a_signed`` / ``b_signed``,
    else unsigned); ``c``: the 32-bit accumulator.
    """
    products = []
    for x, y in zip(a, b):
        xs = Mux(a_signed, x.as_signed(), Cat(x, Const(0, 1)).as_signed())
        ys = Mux(b_signed, y.as_signed(), Cat(y, Const(0, 1)).as_signed())
        products.append(xs * ys)
    s = st.cut(p=products, c=c, clamp=clamp)
    width = 34 + bits_for(len(a)) + len(a[0]) + len(b[0])
    total = Const(0, signed(width))
    for p in s.p:
        total = total + p
    total = (total + s.c.as_signed())[:width].as_signed()
    hi = (1 << 31) - 1
    lo = -(1 << 31)
    sat = Mux(total > hi, hi, Mux(total < lo, lo, total))[:32]
    out = Signal(32, name="int_result")
    st.m.d.comb += out.eq(Mux(s.clamp, sat, total[:32]))
    return st.cut(result=out).result
