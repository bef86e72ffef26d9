"""Slot select and child-reuse de-duplication of the box path (``DedupUnit``).

After the box test each slot is its pointer when it hit, else ``INVALID_NODE`` (the pointer is
already ``INVALID_NODE`` for a slot that is not valid or was early-culled at decode). A BVH8 node
(and an instance's filter box) whose children share a pointer ("child reuse", ``range`` 0 in
gpurt ``internalNode.hlsli``) returns it once: slot ``i`` becomes ``INVALID_NODE`` when it equals
slot ``i - 1`` after the test (gpurt ``rtip3_opcode_emulation.hlsl`` ``IntersectNodeBvh8``).
Legacy BVH4 nodes store explicit pointers and are not de-duplicated (``dedup = 0``).

Golden reference: :func:`gpurtl.golden.ray_accel.scalar.box_path.dedup_slots`. One register
(``latency = 1``); the keys pass through to the sort unit.

Interface (clock-enable core): ``en``; ``i``: ``slots[8]`` {``ptr``, ``hit``, ``key``},
``dedup``; ``o``: ``slots[8]`` {``ptr``, ``key``} (the sort unit's input slots).
"""

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring

from gpurtl.facts.fp32 import Float32
from gpurtl.facts.ray_accel import INVALID_NODE, SORT_SLOTS

from ..pipe import EnableCoreSignature, EnableCoreStream
from .sort_unit import SLOT_LAYOUT

__all__ = ["TESTED_SLOT_LAYOUT", "DEDUP_IN_LAYOUT", "DEDUP_OUT_LAYOUT", "DedupUnit", "DedupPipe"]

TESTED_SLOT_LAYOUT = data.StructLayout({"ptr": unsigned(32), "hit": unsigned(1), "key": Float32})
DEDUP_IN_LAYOUT = data.StructLayout(
    {"slots": data.ArrayLayout(TESTED_SLOT_LAYOUT, SORT_SLOTS), "dedup": unsigned(1)}
)
DEDUP_OUT_LAYOUT = data.StructLayout({"slots": data.ArrayLayout(SLOT_LAYOUT, SORT_SLOTS)})


class DedupUnit(wiring.Component):
    """Slot select and de-duplication, one register (see the module doc string)."""

    def __init__(self):
        super().__init__(EnableCoreSignature(DEDUP_IN_LAYOUT, DEDUP_OUT_LAYOUT))

    @property
    def latency(self):
        return 1

    def elaborate(self, platform):
        m = Module()
        tested = []
        for k in range(SORT_SLOTS):
            slot = self.i.slots[k]
            t = Signal(32, name=f"d_tested{k}")
            m.d.comb += t.eq(Mux(slot.hit, slot.ptr, INVALID_NODE))
            tested.append(t)
        with m.If(self.en):
            for k in range(SORT_SLOTS):
                dup = Const(0, 1) if k == 0 else (self.i.dedup & (tested[k] == tested[k - 1]))
                m.d.sync += [
                    self.o.slots[k].ptr.eq(Mux(dup, INVALID_NODE, tested[k])),
                    self.o.slots[k].key.eq(self.i.slots[k].key),
                ]
        return m


class DedupPipe(EnableCoreStream):
    """:class:`DedupUnit` in a valid/ready stream (block ``ray_dedup``), II = 1."""

    def __init__(self):
        super().__init__(DedupUnit(), DEDUP_IN_LAYOUT, DEDUP_OUT_LAYOUT)
