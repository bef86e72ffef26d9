"""Stream (valid/ready) wrapper of an FP32 core: the registered ``fp32_*`` blocks.

The wrapper is :class:`gpurtl.hdl.pipe.EnableCoreStream` (one global enable, a valid bit beside
every pipeline stage, II = 1), with the payload fields driving the core's ports of the same name.
"""

from amaranth.lib import data

from gpurtl.facts.fp32 import Float32

from ..pipe import EnableCoreStream
from .add import FPAddCore
from .cmp import FPCmpCore
from .convert import FPToIntCore, IntToFPCore
from .div import FPDivCore, FPRcpCore
from .fma import FPFMACore
from .minmax import FPMinMaxCore
from .mul import FPMulCore

__all__ = ["UNITS", "FPStreamUnit", "unit_layouts"]

_F = Float32

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


class FPStreamUnit(EnableCoreStream):
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
        super().__init__(core_cls(stages, ftz), in_layout, out_layout)

    @property
    def unit(self):
        return self._unit

    def connect_core(self, m, core):
        _, ins, outs = UNITS[self._unit]
        for name in ins:
            m.d.comb += getattr(core, name).eq(self.i.payload[name])
        for name in outs:
            port = "eq" if name == "equal" else name
            m.d.comb += self.o.payload[name].eq(getattr(core, port))
