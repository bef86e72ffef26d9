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

A datapath whose depth is a parameter is written as a chain of combinational *segments*;
:class:`Stager` puts its ``stages`` registers on the segment boundaries that balance the
segments' estimated delays (:func:`place_registers`), and registers everything that crosses a
chosen boundary as one named bundle, so the code of every segment is the same at any depth.
"""

from itertools import combinations

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
    "place_registers",
    "Stager",
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


def place_registers(weights, stages):
    """The boundaries (``i``: after segment ``i``) that get one of ``stages`` registers.

    The last boundary (the output) always gets one; the others are chosen so that the largest
    summed weight between two registers is as small as it can be, and among equal choices the
    registers sit as late as they can (so equal weights spread them evenly from the output back).

    Parameters
    ----------
    weights : int or sequence of numbers
        The estimated delay of each segment, or the number of segments (all of weight 1).
    stages : int
        Registers to place, from 0 to the number of segments.

    Returns
    -------
    set of int
    """
    if isinstance(weights, int) and not isinstance(weights, bool):
        weights = (1,) * weights
    weights = tuple(weights)
    count = len(weights)
    if isinstance(stages, bool) or not isinstance(stages, int) or not 0 <= stages <= count:
        raise ValueError(f"`stages` must be an integer from 0 to {count}, not {stages!r}")
    if stages == 0:
        return set()

    def worst(inner):
        ends = (-1, *inner, count - 1)
        return max(sum(weights[a + 1 : b + 1]) for a, b in zip(ends, ends[1:]))

    best = min(
        combinations(range(count - 1), stages - 1),
        key=lambda inner: (worst(inner), [-x for x in reversed(inner)]),
    )
    return {*best, count - 1}


def _bundle_shape(value):
    """Shape of a bundle field: a value's own, or an array of a list's (a struct when the
    elements' shapes differ)."""
    if isinstance(value, (list, tuple)):
        shapes = [_bundle_shape(x) for x in value]
        if all(shape == shapes[0] for shape in shapes):
            return data.ArrayLayout(shapes[0], len(shapes))
        return data.StructLayout({str(i): shape for i, shape in enumerate(shapes)})
    return _shape_of(value, None)


def _element(view, i):
    return view[i] if isinstance(view.shape(), data.ArrayLayout) else view[str(i)]


def _bundle_assign(target, value):
    if isinstance(value, (list, tuple)):
        out = []
        for i, x in enumerate(value):
            out += _bundle_assign(_element(target, i), x)
        return out
    return [target.eq(value)]


def _bundle_read(view, value):
    if isinstance(value, (list, tuple)):
        return [_bundle_read(_element(view, i), x) for i, x in enumerate(value)]
    return view


class Bundle(dict):
    """What crosses a segment boundary: ``bundle.name`` or ``bundle["name"]``."""

    __getattr__ = dict.__getitem__


class Stager:
    """The pipeline registers of one datapath (see the module doc string).

    Parameters
    ----------
    m : Module
        Module the registers are added to.
    en : Value
        Clock enable of every register.
    weights : int or sequence of numbers
        Segments and their estimated delays (:func:`place_registers`).
    stages : int
        Registers to place; the datapath's latency.
    name : str
        Prefix of the registers' names: the bundle after segment ``i`` is ``{name}{i}``.
    """

    def __init__(self, m, en, weights, stages, name="s"):
        self._m, self._en, self._name = m, en, name
        self._count = weights if isinstance(weights, int) else len(weights)
        self._chosen = place_registers(weights, stages)
        self._stages = stages
        self._index = 0

    @property
    def module(self):
        """The module the datapath is built in."""
        return self._m

    @property
    def latency(self):
        """Registers between the first segment's inputs and the last cut's outputs."""
        return self._stages

    @property
    def chosen(self):
        """The boundaries that get a register."""
        return set(self._chosen)

    @property
    def done(self):
        """Whether every boundary has been passed (:meth:`cut` called once per segment)."""
        return self._index == self._count

    def cut(self, **values):
        """Pass ``values`` (values, views, or lists of them) over the next boundary.

        Returns
        -------
        Bundle
            The same names: the values themselves, or their registered copies when this
            boundary has a register (lists stay lists).
        """
        index = self._index
        if index >= self._count:
            raise RuntimeError(f"more cuts than the {self._count} segments declared")
        self._index += 1
        if index not in self._chosen:
            return Bundle(values)
        layout = data.StructLayout({key: _bundle_shape(v) for key, v in values.items()})
        wire = Signal(layout, name=f"{self._name}{index}_in")
        for key, value in values.items():
            self._m.d.comb += _bundle_assign(wire[key], value)
        bank = reg(self._m, self._en, wire, f"{self._name}{index}")
        return Bundle({key: _bundle_read(bank[key], v) for key, v in values.items()})
