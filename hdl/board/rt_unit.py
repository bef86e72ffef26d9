"""The RT unit with its node memory on the board, as a block the UART harness can drive.

:class:`RtUnitBoard` joins :class:`~gpurtl.hdl.rt_unit.top.RtUnit` and a
:class:`~gpurtl.hdl.rt_unit.node_rom.NodeRom` holding a scene's BVH lines in block RAM: the RT
unit's memory requests and fills go to the node memory, so a traversal step needs no host
round trip per node. Its ``i`` stream is the RT unit's instruction stream (``tag`` = wave), its
``o`` stream the RT unit's results (``wave``, ``result``); the wait-instruction input is idle.
Results come out in order within a wave and out of order across waves (docs/rt_unit.md), so a
host that keeps several waves' instructions in flight matches results by ``wave``.
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..rt_unit.node_fetch import fetch_layout
from ..rt_unit.node_rom import NodeRom
from ..rt_unit.top import RtUnit

__all__ = ["RtUnitBoard"]


class RtUnitBoard(wiring.Component):
    """An RT unit whose L0 misses are answered by a node memory on the chip.

    Parameters
    ----------
    image : list of int
        The node memory's 1024-bit lines (:class:`~gpurtl.hdl.rt_unit.node_rom.NodeRom`).
    latency : int
        The node memory's latency in cycles.
    **rt_unit
        :class:`~gpurtl.hdl.rt_unit.top.RtUnit`'s parameters (L0 geometry, ``tag_bits``, the
        accelerator build).

    Attributes
    ----------
    i : In(stream.Signature(fetch_layout(tag_bits)))
        Intersect instructions; ``tag`` is the wave.
    o : Out(stream.Signature(StructLayout(wave, result)))
        The RT unit's ``out``.
    err : Out(StructLayout(unexpected_fill, dual, range))
        The RT unit's and the node memory's error pulses.
    """

    def __init__(self, image, *, latency=1, **rt_unit):
        self.unit = RtUnit(**rt_unit)
        beats = self.unit.fetch.l0.geometry.beats
        if beats != 1:
            raise ValueError(
                f"`beats` must be 1 on the board (the node memory sends whole lines), not {beats}"
            )
        self.rom = NodeRom(image, line_bits=self.unit.fetch.line_bits, latency=latency)
        out = self.unit.signature.members["out"].signature
        super().__init__(
            {
                "i": In(stream.Signature(fetch_layout(self.unit.tag_bits))),
                "o": Out(out),
                "err": Out(data.StructLayout({"unexpected_fill": 1, "dual": 1, "range": 1})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        m.submodules.rom = rom = self.rom
        wiring.connect(m, wiring.flipped(self.i), unit.inst)
        wiring.connect(m, unit.out, wiring.flipped(self.o))
        wiring.connect(m, unit.mem_req, rom.mem_req)
        wiring.connect(m, rom.fill, unit.fill)
        m.d.comb += [
            unit.wait.valid.eq(0),
            self.err.unexpected_fill.eq(unit.err.unexpected_fill),
            self.err.dual.eq(unit.err.dual),
            self.err.range.eq(rom.err.range),
        ]
        return m
