"""Register allocators: port layouts, enumerations, geometries and parameter rules.

Shared by the RTL (:mod:`gpurtl.hdl.vgpr_alloc`) and the golden models
(:mod:`gpurtl.golden.vgpr_alloc`).

Every allocator is a cycle-stepped block with one command port and one translation-lookup port per
clock:

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
(AMD "RDNA4 Instruction Set Architecture" guide, section 3.3.3).

The launch-time (static) allocators, RDNA static VGPRs and Intel GRFs (:class:`ContigConfig`), are
both contiguous first-fit allocators over a file of equal *units*; they differ only in the numbers
below.

RDNA (GFX10.3+/GFX12) non-dynamic VGPRs (LLVM ``llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp``
``getVGPRAllocGranule``/``getTotalNumVGPRs``/``getMaxWavesPerEU`` and the RDNA 4 ISA guide section
3.3.2.1): 1536 (1.5x parts such as gfx1200/gfx1201) or 1024 wave32 VGPRs
per SIMD, granule 24/16 VGPRs (wave32) or 12/8 (wave64, where one wave64 VGPR takes two wave32
rows), at most 256 VGPRs per wave, 16 wave slots, a wave with 0 VGPRs gets one granule
(``alignTo(max(N, 1), granule)``).

Intel Xe3 (IGC ``visa/G4_Kernel.cpp`` ``GRFMode`` and Mesa ``src/intel/compiler/brw_compiler.c``
``brw_register_blocks``): 1024 GRFs per vector engine (inferred from the Xe2 file size and the
largest block count; not documented for Xe3), 10 thread slots, sizes 32..192 in steps of 32 and 256
(193-256 take 256; field value 6 = 224 is never used). The earlier fixed modes: 128 GRFs
x 8 threads or 256 GRFs x 4 threads ("large GRF"), same 1024-GRF file (Xe2 sizes).

Where the allocation lives in the file is not documented for either vendor; these allocators use
first fit over units (the policy of gem5's ``src/gpu-compute/dyn_pool_manager.cc``).

The dynamic allocator's register ``SQ_DYN_VGPR`` fields (Linux
``drivers/gpu/drm/amd/include/asic_reg/gc/gc_12_0_0_sh_mask.h``) bound its parameters
(:func:`dyn_params_ok`).
"""

from dataclasses import dataclass

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

__all__ = [
    "Op",
    "Err",
    "COUNT_BITS",
    "WAVE_BITS",
    "REG_BITS",
    "command_layout",
    "result_layout",
    "ContigConfig",
    "rdna_static_config",
    "xe_config",
    "XE_MODES",
    "dyn_params_ok",
    "DynVgprConfig",
    "DYN_DEFAULTS",
]

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
    return data.StructLayout(
        {
            "op": Op,
            "wave": unsigned(WAVE_BITS),
            "count": unsigned(COUNT_BITS),
            "lk_wave": unsigned(WAVE_BITS),
            "lk_reg": unsigned(REG_BITS),
        }
    )


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


XE_MODES = ("xe3", "grf128", "grf256")


@dataclass(frozen=True)
class ContigConfig:
    """A contiguous allocator's geometry.

    ``units`` allocation units of ``unit_rows`` physical rows; register ``r`` of a wave whose
    allocation starts at unit ``base`` lives in row ``base * unit_rows + r * row_stride``; a unit
    holds ``regs_per_unit`` registers. A request of ``n`` registers (``n <= max_count``) needs as many
    units as there are ``thresholds`` below ``max(n, 1)``.
    """

    name: str
    slots: int
    units: int
    unit_rows: int
    regs_per_unit: int
    row_stride: int
    thresholds: tuple
    max_count: int

    @property
    def rows(self):
        return self.units * self.unit_rows

    @property
    def max_units(self):
        return len(self.thresholds)

    def need(self, count):
        """Units for a request of ``count`` registers (``None`` when above ``max_count``)."""
        if count > self.max_count:
            return None
        n = max(count, 1)
        return sum(1 for t in self.thresholds if n > t)


def rdna_static_config(rf_vgprs=1536, wave64=False):
    if rf_vgprs not in (1024, 1536):
        raise ValueError(f"`rf_vgprs` must be 1024 or 1536, not {rf_vgprs}")
    granule32 = 24 if rf_vgprs == 1536 else 16
    granule = granule32 // 2 if wave64 else granule32
    max_units = -(-256 // granule)
    return ContigConfig(
        name=f"rdna-static-{rf_vgprs}-{'w64' if wave64 else 'w32'}",
        slots=16,
        units=rf_vgprs // granule32,
        unit_rows=granule32,
        regs_per_unit=granule,
        row_stride=2 if wave64 else 1,
        thresholds=tuple(granule * u for u in range(max_units)),
        max_count=256,
    )


def xe_config(mode="xe3"):
    if mode == "xe3":
        return ContigConfig(
            name="xe3",
            slots=10,
            units=32,
            unit_rows=32,
            regs_per_unit=32,
            row_stride=1,
            thresholds=(0, 32, 64, 96, 128, 160, 192, 192),
            max_count=256,
        )
    if mode == "grf128":
        return ContigConfig(
            name="grf128",
            slots=8,
            units=32,
            unit_rows=32,
            regs_per_unit=32,
            row_stride=1,
            thresholds=(0,) * 4,
            max_count=128,
        )
    if mode == "grf256":
        return ContigConfig(
            name="grf256",
            slots=4,
            units=32,
            unit_rows=32,
            regs_per_unit=32,
            row_stride=1,
            thresholds=(0,) * 8,
            max_count=256,
        )
    raise ValueError(f"`mode` must be one of {', '.join(XE_MODES)}, not {mode!r}")


@dataclass(frozen=True)
class DynVgprConfig:
    """The build parameters of the RDNA 4 dynamic-VGPR allocator with their defaults (the RTL,
    the golden model and the registry take them from here): the register file of gfx1200/gfx1201
    (1536 VGPRs per SIMD) and the ``SQ_DYN_VGPR`` fields ``BLOCK_SIZE`` 16, ``WAVE_LIMIT`` 16,
    ``MAX_BLOCK_ALLOC + 1`` = 8, ``FWD_PROGRESS`` on; ``reserve`` = ``max_blocks - 1`` blocks
    kept back, so that one wave can always reach the maximum (the RDNA 4 ISA guide says only that
    enough is reserved for that; the exact rule is a choice, docs/vgpr_alloc.md)."""

    rf_vgprs: int = 1536
    block_size: int = 16
    wave_limit: int = 16
    max_blocks: int = 8
    fwd_progress: bool = True
    reserve: int = 7


#: The defaults of :class:`DynVgprConfig`.
DYN_DEFAULTS = DynVgprConfig()


def dyn_params_ok(
    rf_vgprs=DYN_DEFAULTS.rf_vgprs,
    block_size=DYN_DEFAULTS.block_size,
    wave_limit=DYN_DEFAULTS.wave_limit,
    max_blocks=DYN_DEFAULTS.max_blocks,
    fwd_progress=DYN_DEFAULTS.fwd_progress,
    reserve=DYN_DEFAULTS.reserve,
    **_,
):
    """Check a dynamic-VGPR allocator configuration; raise :exc:`ValueError` if it cannot be built.

    The ranges are those of the ``SQ_DYN_VGPR`` fields (``WAVE_LIMIT``, ``MAX_BLOCK_ALLOC + 1``,
    ``BLOCK_SIZE``) and of the register file sizes; the reserve must fit in the shared pool.
    Extra keyword arguments (other parameters of the same block) are ignored.
    """
    if rf_vgprs not in (1024, 1536):
        raise ValueError(f"`rf_vgprs` must be 1024 or 1536, not {rf_vgprs}")
    if block_size not in (16, 32):
        raise ValueError(f"`block_size` must be 16 or 32, not {block_size}")
    if not 1 <= wave_limit <= 16:
        raise ValueError(f"`wave_limit` must be an integer from 1 to 16, not {wave_limit}")
    if not 1 <= max_blocks <= 8:
        raise ValueError(f"`max_blocks` must be an integer from 1 to 8, not {max_blocks}")
    if reserve < 0:
        raise ValueError(f"`reserve` must be a non-negative integer, not {reserve}")
    pool = rf_vgprs // block_size - wave_limit
    if fwd_progress and reserve > pool:
        raise ValueError(f"`reserve` ({reserve}) must not exceed the shared pool of {pool} blocks")
