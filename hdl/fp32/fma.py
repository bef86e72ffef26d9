"""Pipelined binary32 fused multiply-add core (``FPFMACore``).

``z = a * b + c`` with a single rounding, IEEE 754 binary32, round to nearest even, bit-exact
with :func:`gpurtl.golden.fp32.fma`.

The exact 48-bit product sits at bits 3..50 of a 78-bit window (its units bit at 49). The addend's
significand starts at bits 53..76 (three bits above the product) and is shifted right by
``27 - (ec - (ea + eb - 127))``; bits shifted below the window are jammed into bit 0. When the
addend is even further above the product (or the product is zero) it stays at the top and the
window exponent follows the addend: the product then lies at least two bits below the addend's
last bit, so only its sign and non-zeroness matter, which the window still has right.

Segments (registers spread by ``stages``, see :mod:`.common`):

1. unpack, specials, product exponent, trailing zeros of the addend;
2. alignment distance and window exponent; four 12 x 12 partial products (one DSP each);
3. addend alignment (right shift; lost bits known from the trailing zeros); product sum;
4. window add or subtract (signed);
5. absolute value, result sign;
6-12. leading-zero count, normalise or denormalise, round, pack.
"""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib.wiring import In, Out

from .common import (
    ROUND_WEIGHTS,
    SPEC_INF,
    SPEC_NAN,
    SPEC_NONE,
    FPCore,
    round_pack,
    trailing_zeros,
    unpack,
)

__all__ = ["FPFMACore"]

_WINDOW = 78


class FPFMACore(FPCore):
    """Binary32 fused multiply-add datapath with a clock enable and no handshake.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 12; ``latency == stages``. Default 12.
    ftz : bool
        Flush subnormal inputs and results to signed zero.

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a, b, c : In(32)
        Operands (bit patterns).
    z : Out(32)
        ``a * b + c`` rounded once, ``latency`` enabled cycles later.
    """

    WEIGHTS = (1.5, 1.5, 1.5, 1.5, 1.5) + ROUND_WEIGHTS
    DEFAULT_STAGES = 12

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "b": In(32), "c": In(32), "z": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        a, b, c = (unpack(x, self.ftz) for x in (self.a, self.b, self.c))
        sp = a.sign ^ b.sign
        p_inf = a.is_inf | b.is_inf
        p_zero = a.is_zero | b.is_zero
        nan = (
            a.is_nan
            | b.is_nan
            | c.is_nan
            | (a.is_inf & b.is_zero)
            | (a.is_zero & b.is_inf)
            | (p_inf & c.is_inf & (sp != c.sign))
        )
        spec = Mux(nan, SPEC_NAN, Mux(p_inf | c.is_inf, SPEC_INF, SPEC_NONE))
        spec_sign = Mux(p_inf, sp, c.sign)
        ep = (a.exp + b.exp - 127).as_signed()  # biased exponent of product bit 49
        s = st.cut(
            sa=a.sig,
            sb=b.sig,
            sc=c.sig,
            ec=c.exp,
            ep=ep,
            p_zero=p_zero,
            sp=sp,
            sc_sign=c.sign,
            spec=spec,
            spec_sign=spec_sign,
            tzc=trailing_zeros(c.sig),
        )
        # segment 2: alignment distance; partial products
        dd = (s.ec - s.ep).as_signed()  # addend units bit minus product's
        top = (dd > 27) | s.p_zero
        rshift = (s.ep + 27 - s.ec).as_signed()
        rshift = Mux(top, 0, Mux(rshift > _WINDOW, _WINDOW, rshift))[:7]
        exp = Mux(top, s.ec + 1, s.ep + 28)  # biased exponent of window bit 77
        al, ah, bl, bh = s.sa[0:12], s.sa[12:24], s.sb[0:12], s.sb[12:24]
        s = st.cut(
            ll=al * bl,
            lh=al * bh,
            hl=ah * bl,
            hh=ah * bh,
            sc=s.sc,
            tzc=s.tzc,
            rshift=rshift,
            exp=exp,
            sp=s.sp,
            sc_sign=s.sc_sign,
            spec=s.spec,
            spec_sign=s.spec_sign,
        )
        # segment 3: addend alignment (bits below the window jam into bit 0); the exact product
        aligned = (Cat(Const(0, 53), s.sc) >> s.rshift)[:77]
        lost = s.sc.any() & (s.rshift > s.tzc + 53)
        product = (s.ll + ((s.lh + s.hl) << 12) + (s.hh << 24))[:48]
        s = st.cut(
            product=product,
            addend=aligned | lost,
            exp=s.exp,
            sp=s.sp,
            sc_sign=s.sc_sign,
            spec=s.spec,
            spec_sign=s.spec_sign,
        )
        # segment 4: add or subtract in the window
        pw = Cat(Const(0, 3), s.product)
        effsub = s.sp != s.sc_sign
        total = Mux(effsub, pw - s.addend, pw + s.addend)[: _WINDOW + 1].as_signed()
        s = st.cut(
            total=total, exp=s.exp, sp=s.sp, sc_sign=s.sc_sign, spec=s.spec, spec_sign=s.spec_sign
        )
        # segment 5: magnitude and sign
        neg = s.total < 0
        mag = Mux(neg, -s.total, s.total)[:_WINDOW]
        sign = s.sp ^ neg
        s = st.cut(
            mag=mag,
            sign=sign,
            exp=s.exp,
            zero_sign=s.sp & s.sc_sign,
            spec=s.spec,
            spec_sign=s.spec_sign,
        )
        out = round_pack(
            st,
            sign=s.sign,
            exp=s.exp,
            sig=s.mag,
            sticky=Const(0, 1),
            width=_WINDOW,
            ftz=self.ftz,
            spec=s.spec,
            spec_sign=s.spec_sign,
            zero_sign=s.zero_sign,
        )
        assert st.done
        m.d.comb += self.z.eq(out.z)
        return m
