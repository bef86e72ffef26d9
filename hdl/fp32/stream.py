"""Stream (valid/ready) wrapper of an FP32 core: the registered ``fp32_*`` blocks.

The wrapper adds the handshake around one core: a valid bit travels beside every pipeline stage,
and one global enable ``en = ~o.valid | o.ready`` advances the core's registers and the valid
bits together (``i.ready = en``). So a new operation is accepted every cycle (II = 1) while the
output is taken, and the whole pipeline holds still, without losing or duplicating anything,
while the output is refused.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from gpurtl.facts.fp32 import Float32

from .add import FPAddCore
from .cmp import FPCmpCore
from .convert import FPToIntCore, IntToFPCore
from .div import FPDivCore, FPRcpCore
from .fma import FPFMACore
from .minmax import FPMinMaxCore
from .mul import FPMulCore

__all__ = ["UNITS", "FPStreamUnit", "unit_layouts"]

_F = Float32()

#: unit name -> (core class, input fields, output fields); fields map to core ports of the
#: same name, except ``equal`` -> the compare core's ``eq`` (a payload field called ``eq`` would
#: be shadowed by ``View.eq``). An int ``n`` marks a plain ``n``-bit field (``signed`` selects
#: int32 rather than uint32; the conversions' integers are 32-bit patterns), the others are
#: :class:`Float32`.
UNITS = {
    "add": (FPAddCore, {"a": _F, "b": _F, "sub": 1}, {"z": _F}),
    "mul": (FPMulCore, {"a": _F, "b": _F}, {"z": _F}),
    "fma": (FPFMACore, {"a": _F, "b": _F, "c": _F}, {"z": _F}),
    "cmp": (FPCmpCore, {"a": _F, "b": _F}, {"lt": 1, "le": 1, "equal": 1, "unordered": 1}),
    "minmax": (FPMinMaxCore, {"a": _F, "b": _F}, {"min": _F, "max": _F}),
    "rcp": (FPRcpCore, {"a": _F}, {"z": _F}),
    "div": (FPDivCore, {"a": _F, "b": _F}, {"z": _F}),
    "f2i": (FPToIntCore, {"a": _F, "signed": 1}, {"z": 32, "invalid": 1}),
    "i2f": (IntToFPCore, {"a": 32, "signed": 1}, {"z": _F}),
}


def unit_layouts(unit):
    """``(in_layout, out_layout)`` of the stream block of ``unit``."""
    if unit not in UNITS:
        raise ValueError(f"`unit` must be one of {', '.join(UNITS)}, not {unit!r}")
    _, ins, outs = UNITS[unit]
    return data.StructLayout(ins), data.StructLayout(outs)


class FPStreamUnit(wiring.Component):
    """One FP32 core behind a valid/ready stream interface.

    Parameters
    ----------
    unit : str
        One of :data:`UNITS`.
    stages : int
        Pipeline registers of the core, at least 1 (``latency == stages``); ``None`` for the
        core's default.
    ftz : bool
        Flush subnormal inputs and results to signed zero.

    Attributes
    ----------
    i : In(stream.Signature(in_layout))
        Operations.
    o : Out(stream.Signature(out_layout))
        Results, in order, ``latency`` cycles after acceptance when ``o.ready`` stays high.
    """

    def __init__(self, unit, stages=None, ftz=False):
        in_layout, out_layout = unit_layouts(unit)
        core_cls = UNITS[unit][0]
        if stages is None:
            stages = core_cls.DEFAULT_STAGES
        if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
            raise ValueError(f"`stages` must be a positive integer, not {stages!r}")
        self._unit = unit
        self._core = core_cls(stages, ftz)
        super().__init__(
            {"i": In(stream.Signature(in_layout)), "o": Out(stream.Signature(out_layout))}
        )

    @property
    def unit(self):
        return self._unit

    @property
    def core(self):
        return self._core

    @property
    def latency(self):
        return self._core.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en), core.en.eq(en)]
        _, ins, outs = UNITS[self._unit]
        for name in ins:
            m.d.comb += getattr(core, name).eq(self.i.payload[name])
        for name in outs:
            port = "eq" if name == "equal" else name
            m.d.comb += self.o.payload[name].eq(getattr(core, port))
        valid = self.i.valid
        for stage in range(self.latency):
            reg = Signal(name=f"s{stage}_valid")
            with m.If(en):
                m.d.sync += reg.eq(valid)
            valid = reg
        m.d.comb += self.o.valid.eq(valid)
        return m
