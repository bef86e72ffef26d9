"""Pipelined binary32 comparison core (``FPCmpCore``): ``lt``, ``le``, ``eq``, ``unordered``.

IEEE 754 quiet comparisons, bit-exact with :func:`gpurtl.golden.fp32.lt` etc.: a NaN operand makes
``lt``, ``le`` and ``eq`` false and ``unordered`` true; ``-0 == +0``. With ``ftz`` subnormal
operands compare as zeros of their sign.

Segments: 1. unpack (flush), NaN and zero tests; 2. magnitude comparisons and sign logic.
"""

from amaranth.hdl import Module, Mux
from amaranth.lib.wiring import In, Out

from .common import FPCore, unpack

__all__ = ["FPCmpCore"]


class FPCmpCore(FPCore):
    """Binary32 compare datapath with a clock enable and no handshake.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 2; ``latency == stages``. Default 1.
    ftz : bool
        Subnormal operands compare as zero.

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a, b : In(32)
        Operands (bit patterns).
    lt, le, eq, unordered : Out(1)
        ``a < b``, ``a <= b``, ``a == b``, either is a NaN.
    """

    WEIGHTS = (1.0, 1.5)
    DEFAULT_STAGES = 1

    def __init__(self, stages=None, ftz=False):
        super().__init__(
            {
                "a": In(32),
                "b": In(32),
                "lt": Out(1),
                "le": Out(1),
                "eq": Out(1),
                "unordered": Out(1),
            },
            stages,
            ftz,
        )

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        a = unpack(self.a, self.ftz)
        b = unpack(self.b, self.ftz)
        s = st.cut(ma=a.mag, mb=b.mag, sa=a.sign, sb=b.sign, un=a.is_nan | b.is_nan)
        both_zero = (s.ma == 0) & (s.mb == 0)
        less = Mux(s.sa != s.sb, s.sa, Mux(s.sa, s.ma > s.mb, s.ma < s.mb)) & ~both_zero
        same = both_zero | ((s.sa == s.sb) & (s.ma == s.mb))
        s = st.cut(lt=less & ~s.un, eq=same & ~s.un, un=s.un)
        assert st.done
        m.d.comb += [
            self.lt.eq(s.lt),
            self.eq.eq(s.eq),
            self.le.eq(s.lt | s.eq),
            self.unordered.eq(s.un),
        ]
        return m
