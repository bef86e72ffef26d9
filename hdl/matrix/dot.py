"""One dot-product step of the matrix core: ``L`` products fused with an accumulator value.

:class:`DotStep` is a clock-enable core (:class:`gpurtl.hdl.pipe.EnableCoreSignature`): its input
is ``L`` element pairs, the accumulator value and three control bits, its output the step's
result ``stages`` enabled clocks later. Floating-point families build the algorithm of their
preset (:class:`gpurtl.facts.matrix.Algorithm`, golden model
:func:`gpurtl.golden.matrix.arith.dot`), the ``"tr"`` and the ``"gtr"`` structure alike; integer
families the exact integer step. Both are combinational chains cut into segments, whose
boundaries a :class:`gpurtl.hdl.pipe.Stager` registers:

1. decode the ``L`` pairs, exact significand products (one multiplier per lane), exponent sums,
   special-value flags;
2. largest exponent, alignment of every product (truncated to ``F`` bits after it) and the signed
   sum (``"gtr"``: one sum for the even and one for the odd products, each against its own
   largest exponent, then both floored to the larger of the two and added);
3. accumulator decode and alignment (floored), the two added (``"gtr"``: C dropped below
   ``e_big - F - 1``);
4. normalisation (leading-one search, floored to ``F2`` bits);
5. rounding to the output format, special values, packing.

The control bits are ``a_alt``, ``b_alt`` (FP8 families: the A / B element is BF8, not FP8) or
``a_signed``, ``b_signed``, ``clamp`` (integer families).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.utils import bits_for

from gpurtl.facts.matrix import FORMATS, family_variants
from gpurtl.facts.matrix import preset as get_preset

from ..pipe import EnableCoreSignature, Stager

__all__ = [
    "FLOAT_WEIGHTS",
    "INT_WEIGHTS",
    "FLOAT_CUTS",
    "INT_CUTS",
    "DotStep",
    "step_params",
    "unit_width",
    "float_step",
    "int_step",
    "decode",
    "msb",
]

#: Estimated delays of the segments of :func:`float_step` (equal: no estimate is better than
#: another; :func:`gpurtl.hdl.pipe.place_registers` then spreads the registers evenly).
FLOAT_WEIGHTS = (1, 1, 1, 1, 1)
#: Segments of :func:`int_step`: the products, the sum.
INT_WEIGHTS = (1, 1)
#: Pipeline boundaries of each step (the largest ``stages``).
FLOAT_CUTS = len(FLOAT_WEIGHTS)
INT_CUTS = len(INT_WEIGHTS)

_EXP = signed(12)
NORM_EMIN = -126


def unit_width(variants, preset):
    """Products per step of a unit running ``variants``: the preset's group for floats, the
    widest stored K for integers (their sum is exact, one step per element)."""
    if variants[0].is_int:
        return max(v.k_stored for v in variants)
    return preset.algorithm(variants[0].a).group


def step_params(family, preset, stages):
    """``(variant, algorithm, width, weights)`` of a step of ``family`` under ``preset`` with
    ``stages`` registers; ValueError naming what is wrong otherwise."""
    variants = family_variants(family)
    v = variants[0]
    p = get_preset(preset)
    alg = None if v.is_int else p.algorithm(v.a)
    width = unit_width(variants, p)
    for x in variants:  # integer units span the widest K; a shallower op leaves lanes idle
        if not v.is_int and x.k_stored % width:
            raise ValueError(f"group {width} does not divide K = {x.k_stored} of {x.name}")
    weights = INT_WEIGHTS if v.is_int else FLOAT_WEIGHTS
    if isinstance(stages, bool) or not isinstance(stages, int) or not 0 <= stages <= len(weights):
        raise ValueError(f"`stages` must be an integer from 0 to {len(weights)}, not {stages!r}")
    return v, alg, width, weights


class DotStep(wiring.Component):
    """One step of ``family`` under ``preset``, ``stages`` registers deep (see the module doc).

    Parameters
    ----------
    family : str
        A key of :data:`gpurtl.facts.matrix.FAMILIES`.
    preset : str
        A key of :data:`gpurtl.facts.matrix.PRESETS`.
    stages : int
        Pipeline registers: 0 .. :data:`FLOAT_CUTS` (floats), 0 .. :data:`INT_CUTS` (integers).

    Attributes
    ----------
    en : In(1)
        Clock enable.
    i : In(StructLayout({"a": ArrayLayout(wa, L), "b": ArrayLayout(wb, L), "c": wc, "ctl": 3}))
        Operand pairs, accumulator value (bits of the output format), control bits.
    o : Out(wc)
        The step's result in the output format.
    """

    def __init__(self, family, preset="rdna4", stages=2):
        self._v, self._alg, self._width, self._weights = step_params(family, preset, stages)
        self._int, self._stages = self._v.is_int, stages
        wa, wb, wc = (FORMATS[x].bits for x in (self._v.a, self._v.b, self._v.cd))
        layout = data.StructLayout(
            {
                "a": data.ArrayLayout(wa, self._width),
                "b": data.ArrayLayout(wb, self._width),
                "c": wc,
                "ctl": 3,
            }
        )
        super().__init__(EnableCoreSignature(layout, wc))

    @property
    def latency(self):
        """Enabled clocks from an input to its result."""
        return self._stages

    @property
    def width(self):
        """Products per step (``L``)."""
        return self._width

    def elaborate(self, platform):
        m = Module()
        st = Stager(m, self.en, self._weights, self._stages, "s")
        a = [self.i.a[j] for j in range(self._width)]
        b = [self.i.b[j] for j in range(self._width)]
        ctl = self.i.ctl
        if self._int:
            z = int_step(st, a, b, self.i.c, ctl[0], ctl[1], ctl[2])
        else:
            fa = fb = [self._alg.element_format(self._v.a)]
            if self._v.a in ("fp8", "bf8"):  # FP8 or BF8 per operand and op
                fa = fb = [self._alg.element_format("fp8"), self._alg.element_format("bf8")]
            z = float_step(st, self._alg, a, b, self.i.c, fa, fb, ctl[0], ctl[1], self._v.cd)
        assert st.done
        m.d.comb += self.o.eq(z)
        return m


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


def _special_exp(m, d, name):
    """The exponent ``"gtr"`` aligns with: -1 for an infinite or NaN value (MMA-Sim's rule)."""
    return _w(m, Mux(d.nan | d.inf, Const(-1, _EXP), d.exp), name)


def _products(m, alg, a, b, a_formats, b_formats, a_sel, b_sel):
    """Segment 1: per lane ``(sig, exp, sign, nan, inf)`` of the exact product."""
    man_a = max(f.man_bits for f in a_formats)
    man_b = max(f.man_bits for f in b_formats)
    man_sum = man_a + man_b
    gtr = alg.structure == "gtr"

    def dec(bits, formats, sel, man, name):
        ds = [decode(bits, f, alg.ftz_in, man, m, f"{name}_{f.name}") for f in formats]
        if len(ds) == 1:
            return ds[0]
        out = _Dec()
        for field in _Dec.__slots__:
            value = Mux(sel, getattr(ds[1], field), getattr(ds[0], field))
            setattr(out, field, _w(m, value, f"{name}_{field}"))
        return out

    lanes = []
    max_exp_in = max(((1 << f.exp_bits) - 2 - f.bias) for f in a_formats) + max(
        ((1 << f.exp_bits) - 2 - f.bias) for f in b_formats
    )
    for j, (x, y) in enumerate(zip(a, b)):
        da = dec(x, a_formats, a_sel, man_a, f"a{j}")
        db = dec(y, b_formats, b_sel, man_b, f"b{j}")
        sig = _w(m, da.sig * db.sig, f"p{j}_sig")
        ea = _special_exp(m, da, f"a{j}_e") if gtr else da.exp
        eb = _special_exp(m, db, f"b{j}_e") if gtr else db.exp
        exp = _w(m, (ea + eb)[:12].as_signed(), f"p{j}_exp")
        nan = da.nan | db.nan | (da.inf & db.zero) | (da.zero & db.inf)
        inf = (da.inf | db.inf) & ~nan
        if alg.overflow_inf and not gtr and max_exp_in + 1 >= 128:
            big = sig[man_sum + 1]  # |product significand| >= 2
            over = (sig != 0) & ((exp + big) >= 128)
            inf = inf | (over & ~nan)
        lanes.append((sig, exp, da.sign ^ db.sign, nan, inf))
    return lanes, man_sum


def _max_exp(m, live, exps, name):
    """``(e_max, has)``: the largest of ``exps`` where ``live``, and whether any is."""
    has = Const(0, 1)
    e_max = Const(-(1 << 11), _EXP)
    for j, (lv, e) in enumerate(zip(live, exps)):
        e_max = _w(m, Mux(lv & (~has | (e > e_max)), e, e_max), f"{name}{j}")
        has = _w(m, has | lv, f"{name}_has{j}")
    return e_max, has


def _truncated_sum(m, F, man_sum, live, sigs, exps, signs, e_max, name):
    """Products aligned to ``e_max``, truncated to ``F`` fraction bits and added (signed)."""
    width = F + 2  # an aligned product: its 2 integer bits and F fraction bits
    total = Const(0, signed(width + 1 + bits_for(len(sigs))))
    for j, (lv, sg, e, sign) in enumerate(zip(live, sigs, exps, signs)):
        d = _w(m, (e_max - e).as_unsigned()[:12], f"{name}_dist{j}")
        d = Mux(d > width, width, d)[: bits_for(width)]
        term = _w(m, Mux(lv, ((sg << (F - man_sum)) >> d)[:width], 0), f"{name}_term{j}")
        term = Cat(term, Const(0, 1)).as_signed()
        total = _w(m, total + Mux(sign, -term, term), f"{name}_sum{j}")
    return total


def _fused_sum(m, alg, s, man_sum):
    """Segment 2: ``(total, e_max, has)`` of the step's products (both structures)."""
    F = alg.frac_bits
    finite = [(sg != 0) & ~n & ~i for sg, n, i in zip(s.sig, s.nan, s.inf)]
    finite = [_w(m, x, f"live{j}") for j, x in enumerate(finite)]
    if alg.structure == "tr":
        e_max, has = _max_exp(m, finite, s.exp, "emax")
        total = _truncated_sum(m, F, man_sum, finite, s.sig, s.exp, s.sign, e_max, "t")
        return total, e_max, has
    # "gtr": special products set the exponents too; even and odd products summed apart
    live = [_w(m, f | n | i, f"elive{j}") for j, (f, n, i) in enumerate(zip(finite, s.nan, s.inf))]
    halves = []
    for part in (0, 1):
        pick = slice(part, None, 2)
        e_h, has_h = _max_exp(m, live[pick], s.exp[pick], f"emax{part}_")
        total_h = _truncated_sum(
            m, F, man_sum, finite[pick], s.sig[pick], s.exp[pick], s.sign[pick], e_h, f"h{part}"
        )
        halves.append((total_h, e_h, has_h))
    (t0, e0, h0), (t1, e1, h1) = halves
    has = h0 | h1
    e_max = _w(m, Mux(h0 & (~h1 | (e0 > e1)), e0, e1), "emax")
    width = t0.shape().width
    aligned = [
        _w(m, _shift_floor(t, (e - e_max)[:12].as_signed(), 0, width + 1), f"h{k}_al")
        for k, (t, e, _) in enumerate(halves)
    ]
    total = _w(m, aligned[0] + aligned[1], "gtr_sum")
    return total, e_max, has


def _accumulate(m, alg, s, fc):
    """Segment 3: the accumulator decoded and aligned, added to the aligned sum."""
    F, F2 = alg.frac_bits, alg.sum_bits
    dc = decode(s.c, fc, alg.ftz_in, m=m, name="c")
    gtr = alg.structure == "gtr"
    e_c = _special_exp(m, dc, "c_e") if gtr else dc.exp
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
    c_nan, c_inf = dc.nan, dc.inf
    if alg.c_drop:  # C below the products' range takes no part, specials included
        gone = _w(m, e_c < (e_big - F - 1), "c_gone")
        c_al = _w(m, Mux(gone, 0, c_al), "c_kept")
        c_nan, c_inf = c_nan & ~gone, c_inf & ~gone
    acc_w = max(dot_width + up, fc.man_bits + 2 + F - fc.man_bits + up) + 2
    acc = Signal(signed(acc_w), name="acc")
    m.d.comb += acc.eq(dot_al + c_al)
    sum_inf = s.pos_inf | s.neg_inf
    nan = s.nan | (s.pos_inf & s.neg_inf) | c_nan | (sum_inf & c_inf & (dc.sign != s.neg_inf))
    return dict(
        acc=acc,
        e_big=e_big,
        nan=nan,
        sum_inf=sum_inf,
        sum_sign=s.neg_inf,
        c_inf=c_inf,
        c_sign=dc.sign,
    )


def _round(m, alg, s, fc, r_w):
    """Segment 5: the normalised total rounded to ``fc``, special values; the result bits."""
    F2 = alg.sum_bits
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
    up = half & (sticky | kept[0]) if alg.rounding == "rne" else Const(0, 1)
    rounded = _w(m, (kept + up)[: fc.man_bits + 2], "res_rounded")
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
    m.d.comb += out.eq(result)
    return out


def float_step(st, alg, a, b, c, a_formats, b_formats, a_sel, b_sel, c_format):
    """Build one step; returns the result bits (output format) after ``st``'s registers.

    ``a``, ``b``: lists of ``L`` element values; ``a_formats``/``b_formats``: one format per value
    of ``a_sel``/``b_sel`` (1-bit selects between two formats of equal width, FP8/BF8) or a
    single format (``a_sel`` ignored); ``c``: accumulator bits in ``c_format``, the output format.
    """
    F, F2 = alg.frac_bits, alg.sum_bits
    fc = FORMATS[c_format]
    m = st.module
    lanes, man_sum = _products(m, alg, a, b, a_formats, b_formats, a_sel, b_sel)
    if F < man_sum:
        raise ValueError(f"`frac_bits` must be at least {man_sum} for these formats, not {F}")
    s = st.cut(
        sig=[x[0] for x in lanes],
        exp=[x[1] for x in lanes],
        sign=[x[2] for x in lanes],
        nan=[x[3] for x in lanes],
        inf=[x[4] for x in lanes],
        c=c,
    )
    total, e_max, has = _fused_sum(m, alg, s, man_sum)
    pos_inf, neg_inf = Const(0, 1), Const(0, 1)
    for i, sign in zip(s.inf, s.sign):
        pos_inf, neg_inf = pos_inf | (i & ~sign), neg_inf | (i & sign)
    any_nan = Const(0, 1)
    for n in s.nan:
        any_nan = any_nan | n
    s = st.cut(
        total=total, e_max=e_max, has=has, nan=any_nan, pos_inf=pos_inf, neg_inf=neg_inf, c=s.c
    )
    s = st.cut(**_accumulate(m, alg, s, fc))

    # segment 4: normalise, floor to F2 bits after the leading one
    acc_w = s.acc.shape().width
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
    return st.cut(result=_round(m, alg, s, fc, r_w)).result


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
    st.module.d.comb += out.eq(Mux(s.clamp, sat, total[:32]))
    return st.cut(result=out).result
