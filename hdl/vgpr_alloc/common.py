"""Port layouts and enumerations shared by the register allocators.

Every allocator in :mod:`gpurtl.hdl.vgpr_alloc` is a cycle-stepped block with one command port and
one translation-lookup port per clock:

``i.op``/``i.wave``/``i.count``
    The command: :class:`Op` ``NONE``, ``LAUNCH`` (put a wave into slot ``wave``; ``count`` is the
    register count it asks for where the allocator allocates at launch), ``ALLOC`` (RDNA 4
    ``s_alloc_vgpr count``; only the dynamic allocator accepts it) or ``END`` (the wave ends and
    everything it holds is freed).
``i.lk_wave``/``i.lk_reg``
    Translation lookup: the physical register-file row that register ``lk_reg`` of wave
    ``lk_wave`` lives in, as a register-file read port would compute it.

Outputs (combinational on this cycle's inputs and the state before the clock edge):

``o.ack``
    The command succeeded (for ``ALLOC`` this is the SCC the wave would see). ``ack = 0`` with
    ``err = NONE`` means a legal request that could not be granted for lack of space.
``o.err``
    :class:`Err`: a misuse code; a misused command changes nothing.
``o.free``/``o.units``
    Free allocation units (blocks or granules) and the units each slot holds, before the edge.
``o.lk_valid``/``o.lk_row``
    The translation result (``lk_valid = 0`` when the register is not allocated to that wave).

The ``count`` field is 9 bits wide, like the source operand bits [8:0] that ``s_alloc_vgpr`` reads
(/work/shared/spec/rdna4_waitcnt_dynvgpr.md B.1, from the RDNA 4 ISA guide section 3.3.3).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

__all__ = ["Op", "Err", "COUNT_BITS", "WAVE_BITS", "REG_BITS", "command_layout",
           "result_layout"]

#: Width of the requested register count (``s_alloc_vgpr`` uses source bits [8:0]).
COUNT_BITS = 9
#: Width of a wave/thread slot number (16 RDNA 4 wave slots, 10 Xe3 thread slots).
WAVE_BITS = 4
#: Width of a register number in a lookup (at most 256 addressable registers on both vendors).
REG_BITS = 8


class Op(enum.Enum, shape=2):
    """Command of one cycle."""
    NONE = 0
    LAUNCH = 1
    ALLOC = 2
    END = 3


class Err(enum.Enum, shape=3):
    """Misuse codes. Any code other than ``NONE`` leaves the allocator state unchanged."""
    NONE = 0
    #: The slot number is not an enabled slot of this allocator.
    BAD_SLOT = 1
    #: ``LAUNCH`` into a slot that already holds a wave.
    SLOT_BUSY = 2
    #: ``ALLOC`` or ``END`` for a slot that holds no wave (freeing blocks that are not held).
    NOT_RESIDENT = 3
    #: The request is above the per-wave maximum (or not a legal size).
    OVER_MAX = 4
    #: The operation is not supported by this allocator (``ALLOC`` on a static allocator).
    BAD_OP = 5


def command_layout():
    """Input layout shared by all allocators."""
    return data.StructLayout({
        "op": Op,
        "wave": unsigned(WAVE_BITS),
        "count": unsigned(COUNT_BITS),
        "lk_wave": unsigned(WAVE_BITS),
        "lk_reg": unsigned(REG_BITS),
    })


def result_layout(*, slots, unit_bits, free_bits, row_bits, extra=None):
    """Output layout: ``slots`` per-slot unit counts of ``unit_bits`` each, a ``free_bits`` free
    count, an ``row_bits`` physical row, plus the ``extra`` fields of one allocator."""
    fields = {
        "ack": unsigned(1),
        "err": Err,
        "free": unsigned(free_bits),
        "units": data.ArrayLayout(unsigned(unit_bits), slots),
        "lk_valid": unsigned(1),
        "lk_row": unsigned(row_bits),
    }
    fields.update(extra or {})
    return data.StructLayout(fields)
