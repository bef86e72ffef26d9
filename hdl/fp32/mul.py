"""Pipelined binary32 multiplier core (``FPMulCore``).

``z = a * b``, IEEE 754 binary32, round to nearest even, bit-exact with
:func:`gpurtl.golden.fp32.mul`.

Segments (registers are spread over them by ``stages``, see :mod:`.common`):

1. unpack, special cases (NaN, ``0 * inf``, infinities), exponent sum;
2. four 12 x 12-bit partial products (one ECP5 18 x 18 DSP block each, no adder inside);
3. sum of the partial products (the exact 48-bit product);
4-10. leading-zero count (subnormal operands), normalise or denormalise, round, pack.
"""

from amaranth.hdl import Const, Module, Mux
from amaranth.lib.wiring import In, Out

from .common import ROUND_WEIGHTS, SPEC_INF, SPEC_NAN, SPEC_NONE, FPCore, round_pack, unpack

__all__ = ["FPMulCore"]


class FPMulCore(FPCore):
    """Binary32 multiply datapath with a clock enable and no handshake.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 10; ``latency == stages``. Default 9.
    ftz : bool
        Flush subnormal inputs and results to signed zero.

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a, b : In(32)
        Operands (bit patterns).
    z : Out(32)
        ``a * b``, ``latency`` enabled cycles later.
    """

    WEIGHTS = (1.0, 2.0, 1.5) + ROUND_WEIGHTS
    DEFAULT_STAGES = 9

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "b": In(32), "z": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        a = unpack(self.a, self.ftz)
        b = unpack(self.b, self.ftz)
        sign = a.sign ^ b.sign
        nan = a.is_nan | b.is_nan | (a.is_inf & b.is_zero) | (a.is_zero & b.is_inf)
        spec = Mux(nan, SPEC_NAN, Mux(a.is_inf | b.is_inf, SPEC_INF, SPEC_NONE))
        # bit 47 of the 48-bit product has biased exponent ea + eb - 126
        exp = (a.exp + b.exp - 126).as_signed()
        s = st.cut(sa=a.sig, sb=b.sig, sign=sign, exp=exp, spec=spec)
        al, ah, bl, bh = s.sa[0:12], s.sa[12:24], s.sb[0:12], s.sb[12:24]
        s = st.cut(
            ll=al * bl, lh=al * bh, hl=ah * bl, hh=ah * bh, sign=s.sign, exp=s.exp, spec=s.spec
        )
        product = (s.ll + ((s.lh + s.hl) << 12) + (s.hh << 24))[:48]
        s = st.cut(product=product, sign=s.sign, exp=s.exp, spec=s.spec)
        out = round_pack(
            st,
            sign=s.sign,
            exp=s.exp,
            sig=s.product,
            sticky=Const(0, 1),
            width=48,
            ftz=self.ftz,
            spec=s.spec,
            spec_sign=s.sign,
            zero_sign=s.sign,
        )
        assert st.done
        m.d.comb += self.z.eq(out.z)
        return m
