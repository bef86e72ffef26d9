"""Pipelined, correctly rounded binary32 divider and reciprocal cores (``FPDivCore``,
``FPRcpCore``).

``z = a / b`` (``FPDivCore``) or ``z = 1 / a`` (``FPRcpCore``), IEEE 754 binary32, round to
nearest even (at most 0.5 ulp off), bit-exact with :func:`gpurtl.golden.fp32.div` /
:func:`~gpurtl.golden.fp32.rcp`: ``x / ±0 = ±inf``, ``1 / ±inf = ±0``, overflow to infinity,
subnormal results rounded exactly (or flushed with ``ftz``).

Algorithm: radix-2 restoring division of the normalised significands. Subnormal operands are
first normalised (leading-zero count and left shift). With ``ma, mb`` in ``[2**23, 2**24)`` the
recurrence ``r0 = ma; q_k = r_k >= mb; r_{k+1} = 2 (r_k - q_k mb)`` yields the 27-bit quotient
``Q = floor(ma * 2**26 / mb)`` one bit per iteration; a non-zero final remainder is the sticky
bit. ``Q`` (leading one at bit 26 or 25, so at least two bits below the rounding position) then
goes through the shared normalise-round-pack back end. Each iteration is one pipeline segment;
``stages`` distributes the registers over all 37 segments, so a new operation enters every cycle
(II = 1) at any ``stages``.

There is no approximate mode: the exact recurrence is cheap enough on an FPGA (no multipliers).
"""

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib.wiring import In, Out

from gpurtl.facts.fp32 import ONE

from .common import (
    ROUND_WEIGHTS,
    SPEC_INF,
    SPEC_NAN,
    SPEC_NONE,
    SPEC_ZERO,
    FPCore,
    leading_zeros,
    round_pack,
    unpack,
)

__all__ = ["FPDivCore", "FPRcpCore", "QUOTIENT_BITS"]

QUOTIENT_BITS = 27


def _divide(m, st, a_bits, b_bits, ftz):
    a = unpack(a_bits, ftz)
    b = unpack(b_bits, ftz)
    sign = a.sign ^ b.sign
    nan = a.is_nan | b.is_nan | (a.is_zero & b.is_zero) | (a.is_inf & b.is_inf)
    spec = Mux(
        nan,
        SPEC_NAN,
        Mux(a.is_inf | b.is_zero, SPEC_INF, Mux(a.is_zero | b.is_inf, SPEC_ZERO, SPEC_NONE)),
    )
    s = st.cut(sa=a.sig, sb=b.sig, ea=a.exp, eb=b.exp, sign=sign, spec=spec)
    # segment 2: leading zeros of subnormal significands
    s = st.cut(
        sa=s.sa,
        sb=s.sb,
        la=leading_zeros(s.sa)[:5],
        lb=leading_zeros(s.sb)[:5],
        ea=s.ea,
        eb=s.eb,
        sign=s.sign,
        spec=s.spec,
    )
    # segment 3: normalise; Q's bit 26 has biased exponent (ea - la) - (eb - lb) + 127
    exp = (s.ea - s.la - s.eb + s.lb + 127).as_signed()
    s = st.cut(r=(s.sa << s.la)[:24], d=(s.sb << s.lb)[:24], exp=exp, sign=s.sign, spec=s.spec)
    # segments 4..30: one quotient bit each
    r, d, q = Cat(s.r, Const(0, 1)), s.d, None
    for _k in range(QUOTIENT_BITS):
        diff = (r - d).as_signed()
        bit = diff >= 0
        r = Cat(Const(0, 1), Mux(bit, diff[:25], r)[:24])  # 2 * (r - bit * d), < 2**25
        q = bit if q is None else Cat(bit, q)
        s = st.cut(r=r, d=d, q=q, exp=s.exp, sign=s.sign, spec=s.spec)
        r, d, q = s.r, s.d, s.q
    out = round_pack(
        st,
        sign=s.sign,
        exp=s.exp,
        sig=s.q,
        sticky=s.r.any(),
        width=QUOTIENT_BITS,
        ftz=ftz,
        spec=s.spec,
        spec_sign=s.sign,
        zero_sign=s.sign,
    )
    assert st.done
    return out.z


_WEIGHTS = (1.5, 1.5, 1.5) + (1.0,) * QUOTIENT_BITS + ROUND_WEIGHTS


class FPDivCore(FPCore):
    """Binary32 divide datapath with a clock enable and no handshake.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 37; ``latency == stages``. Default 24.
    ftz : bool
        Flush subnormal inputs and results to signed zero.

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a, b : In(32)
        Dividend and divisor (bit patterns).
    z : Out(32)
        ``a / b`` correctly rounded, ``latency`` enabled cycles later.
    """

    WEIGHTS = _WEIGHTS
    DEFAULT_STAGES = 24

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "b": In(32), "z": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        m.d.comb += self.z.eq(_divide(m, self._stager(m), self.a, self.b, self.ftz))
        return m


class FPRcpCore(FPCore):
    """Binary32 reciprocal datapath (``1 / a``, correctly rounded), clock enable, no handshake.

    The divider of :class:`FPDivCore` with the constant dividend 1.0 (Yosys folds the constant).

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 37; ``latency == stages``. Default 24.
    ftz : bool
        Flush subnormal inputs and results to signed zero.

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a : In(32)
        Operand (bit pattern).
    z : Out(32)
        ``1 / a`` correctly rounded, ``latency`` enabled cycles later.
    """

    WEIGHTS = _WEIGHTS
    DEFAULT_STAGES = 24

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "z": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        m.d.comb += self.z.eq(_divide(m, self._stager(m), Const(ONE, 32), self.a, self.ftz))
        return m
