"""Small pipeline helpers of the ray accelerator: clock-enabled delay lines (registers, or a
memory ring for long side-band lines), and the stream wrapper that turns a clock-enable core
into a registered ``pipeline`` block."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["delay", "reg", "sideband", "EnableCoreStream", "SIDEBAND_MIN_CYCLES"]

#: Delay lines at least this long are memory rings (:func:`sideband`), shorter ones registers.
SIDEBAND_MIN_CYCLES = 4


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


def sideband(m, en, value, cycles, name, *, shape=None):
    """``value`` delayed by ``cycles`` enabled clocks, in a memory ring when the line is long.

    A field that only waits for the arithmetic (the returned ray, the slot pointers, the status)
    needs no flip-flop per cycle: a ``cycles - 2`` deep memory written and read at the same
    address, which advances with ``en``, the read port's output register and one more register
    give exactly ``cycles`` enabled clocks (the read returns the entry written ``cycles - 2``
    enables ago). The last register is there for timing: a LUT RAM has no output register, so
    the read port's register can end up on the address side and the RAM's read delay in front
    of whatever logic reads the field (on ECP5 the placed 1 x 1 ray accelerator's critical path
    ran from the slot pointers' ring into the de-duplication). Both the memory and the registers
    start at 0, so a memory ring and a register chain are indistinguishable from outside, stalls
    included. Lines shorter than :data:`SIDEBAND_MIN_CYCLES` stay registers.
    """
    if cycles < SIDEBAND_MIN_CYCLES:
        return delay(m, en, value, cycles, name, shape=shape)
    if shape is None:
        shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
    depth = cycles - 2
    mem = Memory(shape=shape, depth=depth, init=[])
    m.submodules[f"{name}_ring"] = mem
    addr = Signal(range(depth), name=f"{name}_addr")
    with m.If(en):
        m.d.sync += addr.eq(Mux(addr == depth - 1, 0, addr + 1))
    wr = mem.write_port()
    rd = mem.read_port(transparent_for=())
    m.d.comb += [wr.addr.eq(addr), wr.data.eq(value), wr.en.eq(en), rd.addr.eq(addr), rd.en.eq(en)]
    return reg(m, en, rd.data, f"{name}_out", shape=shape)


class EnableCoreStream(wiring.Component):
    """Valid/ready stream around a clock-enable core (ports ``en``, ``i``, ``o``, ``.latency``).

    One global enable ``en = ~o.valid | o.ready`` advances the core and a valid bit per stage
    (``i.ready = en``): II = 1 while the output is taken, and the whole pipeline holds still while
    it is refused. ``latency`` is the core's.
    """

    def __init__(self, core, in_layout, out_layout):
        self._core = core
        super().__init__(
            {"i": In(stream.Signature(in_layout)), "o": Out(stream.Signature(out_layout))}
        )

    @property
    def latency(self):
        return self._core.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        en = Signal()
        m.d.comb += [
            en.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(en),
            core.en.eq(en),
            core.i.eq(self.i.payload),
            self.o.payload.eq(core.o),
        ]
        valid = Signal(self.latency, name="valid_chain")
        with m.If(en):
            m.d.sync += valid.eq(Cat(self.i.valid, valid[:-1]))
        m.d.comb += self.o.valid.eq(valid[-1])
        return m
