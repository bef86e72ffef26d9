"""Node lines in block RAM behind the L0's memory side: a read-only memory that answers the
L0's line requests (``mem_req``) with fills after a fixed latency.

The rules are written out in the golden model :mod:`gpurtl.golden.rt_unit.node_rom`:

* Line ``k`` of ``image`` is the 128-byte line at byte address ``128 * k`` of the BVH (the L0's
  line index, ``node_ptr[0] >> 4`` for a BVH8 node).
* One request at a time. A request taken in cycle ``t`` is offered as a fill from cycle
  ``t + latency`` until the L0 takes it; ``mem_req.ready`` is high while no request is held, and
  in the cycle the held fill is taken (one line per ``latency`` cycles at most).
* A line at or above ``len(image)`` is answered with a zero line, and ``err.range`` is high in
  the cycle its request is taken (misuse is defined behaviour).

The lines are an :class:`amaranth.lib.memory.Memory` with a synchronous read port whose enable
is low while a fill waits, so that ``fill.payload.data`` is the read port's own output register
and Yosys maps the array to block RAM (``DP16KD`` on the ECP5, 36 bits x 512 lines each, so a
1024-bit line of up to 512 lines takes 29 of them). ``fill.payload.data`` is only meaningful
while ``fill.valid`` is high.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .l0_cache import LINE_BITS

__all__ = ["NodeRom", "node_rom_signature"]


def node_rom_signature(line_bits=16):
    """The :class:`wiring.Signature` of :class:`NodeRom`: the memory side of an L0 that moves a
    line in one fill transfer (``beats=1``), flipped."""
    mem_request = data.StructLayout({"line": line_bits})
    fill = data.StructLayout({"line": line_bits, "data": LINE_BITS})
    return wiring.Signature(
        {
            "mem_req": In(stream.Signature(mem_request)),
            "fill": Out(stream.Signature(fill)),
            "err": Out(data.StructLayout({"range": 1})),
        }
    )


class NodeRom(wiring.Component):
    """Read-only node memory answering line requests after ``latency`` cycles.

    Parameters
    ----------
    image : list of int
        The lines, each a 1024-bit integer (byte 0 in bits 0-7), line 0 first.
    line_bits : int
        Width of a line index (the L0's ``line_bits``).
    latency : int
        Cycles from a request taken to its fill offered, at least 1.

    Attributes
    ----------
    mem_req : In(stream.Signature(StructLayout(line)))
    fill : Out(stream.Signature(StructLayout(line, data)))
    err : Out(StructLayout(range))
        High in the cycle a request for a line outside ``image`` is taken.
    """

    def __init__(self, image, *, line_bits=16, latency=1):
        image = list(image)
        if not image or any(
            not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << LINE_BITS
            for v in image
        ):
            raise ValueError("`image` must be a non-empty list of 1024-bit unsigned integers")
        if not isinstance(line_bits, int) or not 1 <= line_bits <= 57:
            raise ValueError(f"`line_bits` must be an integer 1..57, not {line_bits!r}")
        if len(image) > 1 << line_bits:
            raise ValueError(
                f"`image` must have at most 2 ** line_bits = {1 << line_bits} lines, "
                f"not {len(image)}"
            )
        if not isinstance(latency, int) or isinstance(latency, bool) or latency < 1:
            raise ValueError(f"`latency` must be a positive integer, not {latency!r}")
        self.image, self.line_bits, self.latency = image, line_bits, latency
        super().__init__(node_rom_signature(line_bits))

    def elaborate(self, platform):
        m = Module()
        lines = len(self.image)
        # one zero line after the image answers every request outside it
        m.submodules.lines = mem = Memory(shape=LINE_BITS, depth=lines + 1, init=self.image)
        rd = mem.read_port()

        held = Signal(self.line_bits)  # the line of the request being answered
        addr = Signal(range(lines + 1))  # its place in the memory
        busy = Signal()  # a request is held (waiting, or offered as a fill)
        wait = Signal(range(self.latency))  # cycles until the fill is offered
        m.d.comb += [
            self.fill.valid.eq(busy & (wait == 0)),
            self.fill.payload.line.eq(held),
            self.fill.payload.data.eq(rd.data),
        ]
        done = Signal()
        m.d.comb += [
            done.eq(self.fill.valid & self.fill.ready),
            self.mem_req.ready.eq(~busy | done),
        ]
        take = Signal()
        line = self.mem_req.payload.line
        inside = Signal()
        m.d.comb += [
            take.eq(self.mem_req.valid & self.mem_req.ready),
            inside.eq(line < lines),
            self.err.range.eq(take & ~inside),
            # the port reads the new line in the cycle it is taken, then the held line while the
            # fill is not offered; its enable is low while a fill waits, so the data stays
            rd.en.eq(~self.fill.valid | self.fill.ready),
        ]
        m.d.comb += rd.addr.eq(Mux(take, Mux(inside, line, lines), addr))
        with m.If(wait != 0):
            m.d.sync += wait.eq(wait - 1)
        with m.If(done):
            m.d.sync += busy.eq(0)
        with m.If(take):
            m.d.sync += [
                busy.eq(1),
                held.eq(line),
                addr.eq(rd.addr),
                wait.eq(self.latency - 1),
            ]
        return m
