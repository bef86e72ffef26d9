"""A simulation wrapper that keeps the output stall out of a pipeline's registers."""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["BatchTop"]


class BatchTop(wiring.Component):
    """A pipeline block with its ``o.ready`` tied high, behind an output FIFO and credit gating.

    The project's pipelines advance every register with one enable ``en = ~o.valid | o.ready``, so
    in a compiled simulator every register's next state depends on the top-level ``o.ready`` and
    the whole design is re-evaluated as input-combinational logic on every evaluation. Inside this
    wrapper ``o.ready`` is the constant 1, ``en`` folds to 1, and the stall policy acts on the
    wrapper's own streams instead: an output FIFO of ``depth`` entries takes every result, and an
    input is accepted only while the FIFO has room for everything in flight (``credits``), so the
    FIFO never overflows and the wrapper obeys the same valid/ready rules as the block.

    Parameters
    ----------
    dut : wiring.Component
        A pipeline block: ``i: In(stream.Signature(in_layout))``,
        ``o: Out(stream.Signature(out_layout))`` and a ``latency`` property.
    in_layout, out_layout : ShapeCastable
        The payload layouts of ``dut``'s streams.

    Attributes
    ----------
    latency : int
        ``dut.latency + 1``: a result is written into the FIFO ``dut.latency`` cycles after it
        was accepted and can be read one cycle later.
    depth : int
        FIFO entries, ``dut.latency + 2``: enough for one input per cycle while the sink takes
        one output per cycle.
    """

    def __init__(self, dut, in_layout, out_layout):
        latency = getattr(dut, "latency", None)
        if not isinstance(latency, int) or latency < 0:
            raise TypeError(f"`dut` must be a pipeline with an integer `latency`, not {dut!r}")
        self._dut = dut
        self._ii = getattr(dut, "initiation_interval", 1)
        self._out_width = Shape.cast(out_layout).width
        self._latency = latency + 1
        self._depth = latency + 2
        super().__init__(
            {"i": In(stream.Signature(in_layout)), "o": Out(stream.Signature(out_layout))}
        )

    @property
    def latency(self):
        return self._latency

    @property
    def initiation_interval(self):
        """The block's: the wrapper adds no bubble while the FIFO has room."""
        return self._ii

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self._dut
        m.submodules.fifo = fifo = SyncFIFO(width=self._out_width, depth=self._depth)

        # Transactions accepted and not yet delivered: in the block or in the FIFO.
        s0_credits_used = Signal(range(self._depth + 1))
        room = Signal()
        m.d.comb += [
            room.eq(s0_credits_used < self._depth),
            dut.i.valid.eq(self.i.valid & room),
            dut.i.payload.eq(self.i.payload),
            self.i.ready.eq(dut.i.ready & room),
            dut.o.ready.eq(1),
            fifo.w_en.eq(dut.o.valid),
            fifo.w_data.eq(dut.o.payload),
            self.o.valid.eq(fifo.r_rdy),
            self.o.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.o.ready),
        ]
        in_fire = self.i.valid & self.i.ready
        out_fire = self.o.valid & self.o.ready
        with m.If(in_fire & ~out_fire):
            m.d.sync += s0_credits_used.eq(s0_credits_used + 1)
        with m.Elif(out_fire & ~in_fire):
            m.d.sync += s0_credits_used.eq(s0_credits_used - 1)
        return m
