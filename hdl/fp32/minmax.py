"""Pipelined binary32 minimum/maximum core (``FPMinMaxCore``), bit-exact with
:func:`gpurtl.golden.fp32.fmin` / :func:`~gpurtl.golden.fp32.fmax`.

NaN rule: **NaN propagating** (IEEE 754-2019 ``minimum``/``maximum``). When either operand is a NaN
both outputs are the canonical NaN (:data:`gpurtl.facts.fp32.CANONICAL_NAN`); otherwise ``-0``
orders below ``+0``. The ray-box test (gpurt ``src/shaders/IntersectCommon.hlsl``
``fast_intersect_bbox``) relies on this: a NaN slab bound must reach its ``isnan`` check so that
the box is forced to miss. There is no ``nan_mode`` parameter. With ``ftz`` subnormal operands
are flushed to zeros of their sign first (and a flushed operand is output flushed).

Segments: 1. unpack (flush), NaN tests; 2. total-order comparison and selection.
"""

from amaranth.hdl import Cat, Module, Mux
from amaranth.lib.wiring import In, Out

from .common import CANONICAL_NAN, FPCore, unpack

__all__ = ["FPMinMaxCore"]


class FPMinMaxCore(FPCore):
    """Binary32 min/max datapath with a clock enable and no handshake.

    Parameters
    ----------
    stages : int
        Pipeline registers, 0 (combinational) to 2; ``latency == stages``. Default 1.
    ftz : bool
        Flush subnormal operands to signed zero.

    Attributes
    ----------
    en : In(1)
        Every pipeline register advances only while ``en`` is high.
    a, b : In(32)
        Operands (bit patterns).
    min, max : Out(32)
        The smaller and the larger operand (canonical NaN if either is a NaN).
    """

    WEIGHTS = (1.0, 1.5)
    DEFAULT_STAGES = 1

    def __init__(self, stages=None, ftz=False):
        super().__init__({"a": In(32), "b": In(32), "min": Out(32), "max": Out(32)}, stages, ftz)

    def elaborate_rtl(self, platform):
        m = Module()
        st = self._stager(m)
        a = unpack(self.a, self.ftz)
        b = unpack(self.b, self.ftz)
        s = st.cut(ma=a.mag, mb=b.mag, sa=a.sign, sb=b.sign, un=a.is_nan | b.is_nan)
        a_less = Mux(s.sa != s.sb, s.sa, Mux(s.sa, s.ma > s.mb, s.ma < s.mb))
        b_less = Mux(s.sa != s.sb, s.sb, Mux(s.sa, s.mb > s.ma, s.mb < s.ma))
        av, bv = Cat(s.ma, s.sa), Cat(s.mb, s.sb)
        s = st.cut(
            lo=Mux(s.un, CANONICAL_NAN, Mux(b_less, bv, av)),
            hi=Mux(s.un, CANONICAL_NAN, Mux(a_less, bv, av)),
        )
        assert st.done
        m.d.comb += [self.min.eq(s.lo), self.max.eq(s.hi)]
        return m
