"""Pipeline building blocks shared by the RTL: clock-enabled registers and delay lines, the
signature of a clock-enable core, and the valid/ready stream around such a core.

A *clock-enable core* is a datapath without a handshake: every register in it advances only while
its ``en`` input is high, and its output ``o`` is the result of the input ``i`` presented
``latency`` enabled cycles earlier (:class:`EnableCoreSignature`). The FP32 cores, the ray
accelerator's components and the STOC datapaths are such cores. :class:`EnableCoreStream` turns
one into a pipeline block that obeys :mod:`amaranth.lib.stream`: one global enable
``en = ~o.valid | o.ready`` advances the core and a valid bit per stage, and ``i.ready = en``.
So a new transfer is accepted every cycle (II = 1) while the output is taken, and the whole
pipeline, output included, holds still while the output is refused.
"""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = [
    "SIDEBAND_MIN_CYCLES",
    "reg",
    "delay",
    "sideband",
    "EnableCoreSignature",
    "EnableCoreStream",
]

#: Delay lines at least this long are memory rings (:func:`sideband`), shorter ones registers.
SIDEBAND_MIN_CYCLES = 4


def _shape_of(value, shape):
    if shape is not None:
        return shape
    if isinstance(value, data.View):
        return value.shape()
    return Value.cast(value).shape()


def reg(m, en, value, name, *, shape=None):
    """``value`` registered once: a register that loads it on every clock with ``en`` high.

    Parameters
    ----------
    m : Module
        Module the register is added to (``sync`` domain).
    en : Value
        Clock enable.
    value : Value or View
        What is registered.
    name : str
        Name of the register.
    shape : shape-castable, optional
        Shape of the register; by default the shape of ``value`` (a layout for a view).

    Returns
    -------
    Signal
        The register (a view when ``shape`` is a layout), reset to 0.
    """
    r = Signal(_shape_of(value, shape), name=name)
    with m.If(en):
        m.d.sync += r.eq(value)
    return r


def delay(m, en, value, cycles, name, *, shape=None):
    """``value`` delayed by ``cycles`` enabled clocks: a chain of :func:`reg` registers named
    ``{name}_d1`` .. ``{name}_d{cycles}``; ``cycles = 0`` returns ``value`` itself.

    Raises
    ------
    ValueError
        If ``cycles`` is negative.
    """
    if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 0:
        raise ValueError(f"`cycles` must be a non-negative integer, not {cycles!r}")
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
    included. Lines shorter than :data:`SIDEBAND_MIN_CYCLES` are :func:`delay` chains.
    """
    if cycles < SIDEBAND_MIN_CYCLES:
        return delay(m, en, value, cycles, name, shape=shape)
    shape = _shape_of(value, shape)
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


class EnableCoreSignature(wiring.Signature):
    """Signature of a clock-enable core.

    Members
    -------
    en : In(1)
        Clock enable: every register of the core advances only while it is high.
    i : In(in_shape)
        The input.
    o : Out(out_shape)
        The output: the result of the input presented ``latency`` enabled cycles earlier (the
        core's ``latency`` property).

    Further members (a second input that the core samples later, for example) are given as
    keyword arguments.
    """

    def __init__(self, in_shape, out_shape, **members):
        for name in ("en", "i", "o"):
            if name in members:
                raise ValueError(f"`{name}` is a member of every clock-enable core already")
        super().__init__({"en": In(1), "i": In(in_shape), "o": Out(out_shape), **members})


class EnableCoreStream(wiring.Component):
    """A clock-enable core behind a valid/ready stream interface (see the module doc string).

    Parameters
    ----------
    core : wiring.Component
        The core: an ``en`` input member and a ``latency`` property; by default also the ``i``
        and ``o`` members of :class:`EnableCoreSignature`, driven from and into the payloads
        (a subclass with other ports overrides :meth:`connect_core`).
    in_shape, out_shape : shape-castable, optional
        Payload shapes of ``i`` and ``o``; by default the shapes of the core's ``i`` and ``o``.

    Attributes
    ----------
    i : In(stream.Signature(in_shape))
        Transfers into the core.
    o : Out(stream.Signature(out_shape))
        Results in order; the first ``latency`` cycles after its transfer when ``o.ready`` is high.
    """

    def __init__(self, core, in_shape=None, out_shape=None):
        members = core.signature.members
        if in_shape is None:
            in_shape = members["i"].shape
        if out_shape is None:
            out_shape = members["o"].shape
        self._core = core
        super().__init__(
            {"i": In(stream.Signature(in_shape)), "o": Out(stream.Signature(out_shape))}
        )

    @property
    def core(self):
        return self._core

    @property
    def latency(self):
        """Cycles from a transfer on ``i`` to its result on ``o`` while ``o.ready`` is high."""
        return self._core.latency

    def connect_core(self, m, core):
        """Drive the core's input from ``i.payload`` and ``o.payload`` from its output."""
        m.d.comb += [core.i.eq(self.i.payload), self.o.payload.eq(core.o)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en), core.en.eq(en)]
        self.connect_core(m, core)
        m.d.comb += self.o.valid.eq(delay(m, en, self.i.valid, self.latency, "valid"))
        return m
