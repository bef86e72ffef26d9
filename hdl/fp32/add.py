"""Pipelined binary32 adder/subtractor core (``FPAddCore``).

``z = a + b`` (``sub`` low) or ``z = a - b`` (``sub`` high), IEEE 754 binary32, round to nearest
even, bit-exact with :func:`gpurtl.golden.fp32.add` / :func:`~gpurtl.golden.fp32.sub`.

Segments (registers are spread over them by ``stages``, see :mod:`.common`):

1. unpack, special cases (NaN, infinities), order the operands by magnitude;
2. align the smaller significand (3 guard bits, shifted-out bits jammed into a sticky LSB);
3. add or subtract the significands (the larger minus the smaller never borrows);
4-10. leading-zero count, normalise, round, pack (:func:`.common.round_pack`).
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
    shift_right_sticky,
    unpack,
)

__all__ = ["FPAddCore"]


class FPAddCore(FPCore):
    """Binary32 add/subtract datapath with a clock enable and no handshake.

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
    sub : In(1)
        Subtract ``b`` instead of adding it.
    z : Out(32)
        Result, ``latency`` enabled cycles later.
    """

    WEIGHTS = (1.5, 1.5, 1.5) + ROUND_WEIGHTS
    DEFAULT_STAGES = 9

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "b": In(32), "sub": In(1), "z": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        a = unpack(self.a, self.ftz)
        b = unpack(self.b, self.ftz)
        b_sign = b.sign ^ self.sub
        # segment 1: specials and ordering by magnitude
        swap = a.mag < b.mag
        big_sig, big_exp, big_sign = (
            Mux(swap, b.sig, a.sig),
            Mux(swap, b.exp, a.exp),
            Mux(swap, b_sign, a.sign),
        )
        small_sig = Mux(swap, a.sig, b.sig)
        # both exponent differences in parallel with the magnitude comparison, clamped at 28
        dab, dba = (a.exp - b.exp)[:8], (b.exp - a.exp)[:8]
        diff = Mux(swap, Mux(dba > 28, 28, dba), Mux(dab > 28, 28, dab))[:5]
        nan = a.is_nan | b.is_nan | (a.is_inf & b.is_inf & (a.sign != b_sign))
        inf = a.is_inf | b.is_inf
        spec = Mux(nan, SPEC_NAN, Mux(inf, SPEC_INF, SPEC_NONE))
        spec_sign = Mux(a.is_inf, a.sign, b_sign)
        s = st.cut(
            big_sig=big_sig,
            big_exp=big_exp,
            big_sign=big_sign,
            small_sig=small_sig,
            diff=diff,
            effsub=a.sign != b_sign,
            spec=spec,
            spec_sign=spec_sign,
            zero_sign=a.sign & b_sign,
        )
        # segment 2: alignment (27-bit operands: 24 significand bits and 3 guard bits)
        shifted, lost = shift_right_sticky(Cat(Const(0, 3), s.small_sig), s.diff, 27)
        small = shifted | lost
        big = Cat(Const(0, 3), s.big_sig)
        s = st.cut(
            big=big,
            small=small,
            big_exp=s.big_exp,
            big_sign=s.big_sign,
            effsub=s.effsub,
            spec=s.spec,
            spec_sign=s.spec_sign,
            zero_sign=s.zero_sign,
        )
        # segment 3: add or subtract
        total = Mux(s.effsub, s.big - s.small, s.big + s.small)[:28]
        s = st.cut(
            total=total,
            big_exp=s.big_exp,
            big_sign=s.big_sign,
            spec=s.spec,
            spec_sign=s.spec_sign,
            zero_sign=s.zero_sign,
        )
        # segments 4-7: normalise, round, pack; bit 27 has biased exponent big_exp + 1
        out = round_pack(
            st,
            sign=s.big_sign,
            exp=(s.big_exp + 1).as_signed(),
            sig=s.total,
            sticky=Const(0, 1),
            width=28,
            ftz=self.ftz,
            spec=s.spec,
            spec_sign=s.spec_sign,
            zero_sign=s.zero_sign,
            min_exp=2,
        )
        assert st.done
        m.d.comb += self.z.eq(out.z)
        return m
