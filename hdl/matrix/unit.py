"""One dot-product unit alone behind streams: the cost of a format and algorithm.

:class:`DotUnit` is the datapath the matrix core replicates ``dots`` times (:mod:`.dot`), with
its ``L`` operand pairs and accumulator on a stream and its result on another; it is what
``gpurtl experiment matrix`` synthesises per format and algorithm (the whole core adds the
register tiles, the operand selection and the accumulators around ``dots`` of these).
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.matrix import FORMATS, family_variants
from gpurtl.facts.matrix import preset as get_preset

from .dot import FLOAT_CUTS, INT_CUTS, float_step, int_step
from .pipe import Stager

__all__ = ["DotUnit"]


class DotUnit(wiring.Component):
    """One step unit of ``family`` under ``preset`` with ``stages`` registers (II 1)."""

    def __init__(self, family, preset="rdna4", stages=2):
        vs = family_variants(family)
        self._v = vs[0]
        self._int = self._v.is_int
        p = get_preset(preset)
        if self._int:
            self._width = max(v.k_stored for v in vs)
        else:
            self._alg = p.algorithm(self._v.a)
            if self._alg.structure != "tr":
                raise ValueError(f"preset `{preset}` is not built for {family} (only 'tr')")
            self._width = self._alg.group
        self._stages = stages
        wa, wb, wc = (FORMATS[x].bits for x in (self._v.a, self._v.b, self._v.cd))
        fields = {
            "a": data.ArrayLayout(wa, self._width),
            "b": data.ArrayLayout(wb, self._width),
            "c": wc,
            "sel": 3,
        }
        super().__init__(
            {
                "i": In(stream.Signature(data.StructLayout(fields))),
                "o": Out(stream.Signature(data.StructLayout({"z": wc}))),
            }
        )

    @property
    def latency(self):
        return self._stages

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        p = self.i.payload
        a = [p.a[j] for j in range(self._width)]
        b = [p.b[j] for j in range(self._width)]
        st = Stager(m, en, INT_CUTS if self._int else FLOAT_CUTS, self._stages)
        if self._int:
            z = int_step(st, a, b, p.c, p.sel[0], p.sel[1], p.sel[2])
        else:
            fa = [self._alg.element_format(self._v.a)]
            fb = [self._alg.element_format(self._v.b)]
            if self._v.a in ("fp8", "bf8"):
                fa = fb = [self._alg.element_format("fp8"), self._alg.element_format("bf8")]
            z = float_step(st, self._alg, a, b, p.c, fa, fb, p.sel[0], p.sel[1], self._v.cd)
        m.d.comb += self.o.payload.z.eq(z)
        valid = self.i.valid
        for x in range(self._stages):
            reg = Signal(name=f"valid{x}")
            with m.If(en):
                m.d.sync += reg.eq(valid)
            valid = reg
        m.d.comb += self.o.valid.eq(valid | Const(0, 1))
        return m
