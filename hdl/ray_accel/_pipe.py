"""Small pipeline helpers of the ray accelerator: clock-enabled delay lines, and the stream
wrapper that turns a clock-enable core into a registered ``pipeline`` block."""

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["delay", "reg", "EnableCoreStream"]


def reg(m, en, value, name, *, shape=None):
    """``value`` registered once (advances only when ``en``)."""
    if shape is None:
        shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
    r = Signal(shape, name=name)
    with m.If(en):
        m.d.sync += r.eq(value)
    return r


def delay(m, en, value, cycles, name, *, shape=None):
    """``value`` delayed by ``cycles`` enabled clocks (``cycles = 0`` returns it unchanged)."""
    if cycles < 0:
        raise ValueError(f"`cycles` must be a non-negative integer, not {cycles}")
    for k in range(cycles):
        value = reg(m, en, value, f"{name}_d{k + 1}", shape=shape)
    return value


class EnableCoreStream(wiring.Component):
    """Valid/ready stream around a clock-enable core (ports ``en``, ``i``, ``o``, ``.latency``).

    One global enable ``en = ~o.valid | o.ready`` advances the core and a valid bit per stage
    (``i.ready = en``): II = 1 while the output is taken, and the whole pipeline holds still while
    it is refused. ``latency`` is the core's.
    """

    def __init__(self, core, in_layout, out_layout):
        self._core = core
        super().__init__({"i": In(stream.Signature(in_layout)),
                          "o": Out(stream.Signature(out_layout))})

    @property
    def latency(self):
        return self._core.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en), core.en.eq(en),
                     core.i.eq(self.i.payload), self.o.payload.eq(core.o)]
        valid = Signal(self.latency, name="valid_chain")
        with m.If(en):
            m.d.sync += valid.eq(Cat(self.i.valid, valid[:-1]))
        m.d.comb += self.o.valid.eq(valid[-1])
        return m
