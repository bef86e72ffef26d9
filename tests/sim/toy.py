"""Tiny designs used only to test the harness and the tools themselves (not registered)."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.fp32 import Float32
from gpurtl.hdl.fp32.cmp import FPCmpCore
from gpurtl.sim.core.registry import Block, Param

IN = data.StructLayout({"a": unsigned(8), "b": unsigned(8), "f": Float32})
OUT = data.StructLayout({"s": unsigned(9), "f": Float32})


class ToyAdder(wiring.Component):
    """``s = a + b`` and ``f`` passed through, ``stages`` register stages with a global enable."""

    def __init__(self, stages=3, claimed_latency=None):
        self._stages = stages
        self._claimed = stages if claimed_latency is None else claimed_latency
        super().__init__({"i": In(stream.Signature(IN)), "o": Out(stream.Signature(OUT))})

    @property
    def latency(self):
        return self._claimed

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]
        valid, total, f = self.i.valid, self.i.payload.a + self.i.payload.b, self.i.payload.f
        for k in range(self._stages):
            s_valid = Signal(name=f"s{k}_valid")
            s_total = Signal(9, name=f"s{k}_total")
            s_f = Signal(32, name=f"s{k}_f")
            with m.If(en):
                m.d.sync += [s_valid.eq(valid), s_total.eq(total), s_f.eq(f)]
            valid, total, f = s_valid, s_total, s_f
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.s.eq(total), self.o.payload.f.eq(f)]
        return m


def toy_block(golden=None, claimed_latency=None):
    def default_golden(stages):
        return lambda tx: {"s": tx["a"] + tx["b"], "f": tx["f"]}

    def stimulus(rng, count, stages):
        return [
            {
                "a": int(rng.integers(256)),
                "b": int(rng.integers(256)),
                "f": int(rng.integers(2**32)),
            }
            for _ in range(count)
        ]

    return Block(
        name="toy",
        doc="test adder",
        kind="pipeline",
        build=lambda stages: ToyAdder(stages, claimed_latency),
        golden=golden or default_golden,
        layouts=lambda stages: (IN, OUT),
        stimulus=stimulus,
        params=(Param("stages", 3, range=(1, 8)),),
    )


class CompareBank(wiring.Component):
    """``units`` identical FP32 compare cores side by side, each on its own operand ports (a
    design with repeated modules).

    ``lt`` has bit ``k`` from core ``k``. With ``every_result`` the design also reads each core's
    ``le``, ``eq`` and ``unordered`` (outputs of those names); without it, they are results that
    nothing reads.
    """

    RESULTS = ("lt", "le", "eq", "unordered")

    def __init__(self, units, every_result=False):
        self._units = units
        self._results = self.RESULTS if every_result else ("lt",)
        ports = {"en": In(1)} | {name: Out(units) for name in self._results}
        for k in range(units):
            ports |= {f"a{k}": In(32), f"b{k}": In(32)}
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        for k in range(self._units):
            core = m.submodules[f"cmp{k}"] = FPCmpCore()
            m.d.comb += [
                core.en.eq(self.en),
                core.a.eq(getattr(self, f"a{k}")),
                core.b.eq(getattr(self, f"b{k}")),
            ]
            for name in self._results:
                m.d.comb += getattr(self, name)[k].eq(getattr(core, name))
        return m
