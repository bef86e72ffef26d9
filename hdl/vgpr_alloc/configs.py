"""Geometry of the launch-time (static) register allocators: RDNA static VGPRs and Intel GRFs.

Both are contiguous first-fit allocators over a file of equal *units*; they differ only in the
numbers below, which come from the reference notes:

RDNA (GFX10.3+/GFX12) non-dynamic VGPRs (/work/shared/spec/rdna4_waitcnt_dynvgpr.md B.6, from LLVM
``AMDGPUBaseInfo.cpp`` ``getVGPRAllocGranule``/``getTotalNumVGPRs``/``getMaxWavesPerEU`` and the
RDNA 4 ISA guide section 3.3.2.1): 1536 (1.5x parts such as gfx1200/gfx1201) or 1024 wave32 VGPRs
per SIMD, granule 24/16 VGPRs (wave32) or 12/8 (wave64, where one wave64 VGPR takes two wave32
rows), at most 256 VGPRs per wave, 16 wave slots, a wave with 0 VGPRs gets one granule
(``alignTo(max(N, 1), granule)``).

Intel Xe3 (/work/shared/spec/xe3_registers_stoc_omm.md A.2-A.4, from IGC
``visa/G4_Kernel.cpp`` ``GRFMode`` and Mesa ``brw_compiler.c`` ``brw_register_blocks``): 1024 GRFs
per vector engine (A.3, inferred there), 10 thread slots, sizes 32..192 in steps of 32 and 256
(193-256 take 256; field value 6 = 224 is never used). The earlier fixed modes (A.2, A.8): 128 GRFs
x 8 threads or 256 GRFs x 4 threads ("large GRF"), same 1024-GRF file (Xe2 sizes).

Where the allocation lives in the file is not documented for either vendor; these allocators use
first fit over units (the gem5 ``DynPoolManager`` policy, spec B.7).
"""

from dataclasses import dataclass

__all__ = ["ContigConfig", "rdna_static_config", "xe_config", "XE_MODES"]

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
    return ContigConfig(name=f"rdna-static-{rf_vgprs}-{'w64' if wave64 else 'w32'}", slots=16,
                        units=rf_vgprs // granule32, unit_rows=granule32, regs_per_unit=granule,
                        row_stride=2 if wave64 else 1,
                        thresholds=tuple(granule * u for u in range(max_units)), max_count=256)


def xe_config(mode="xe3"):
    if mode == "xe3":
        return ContigConfig(name="xe3", slots=10, units=32, unit_rows=32, regs_per_unit=32,
                            row_stride=1, thresholds=(0, 32, 64, 96, 128, 160, 192, 192),
                            max_count=256)
    if mode == "grf128":
        return ContigConfig(name="grf128", slots=8, units=32, unit_rows=32, regs_per_unit=32,
                            row_stride=1, thresholds=(0,) * 4, max_count=128)
    if mode == "grf256":
        return ContigConfig(name="grf256", slots=4, units=32, unit_rows=32, regs_per_unit=32,
                            row_stride=1, thresholds=(0,) * 8, max_count=256)
    raise ValueError(f"`mode` must be one of {', '.join(XE_MODES)}, not {mode!r}")
