"""Occupancy (resident waves or threads per SIMD / vector engine) as a function of the register
count, written from the published formulas, independent of the allocator models:

* RDNA static VGPRs (LLVM ``llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp``
  ``getNumWavesPerEUWithNumVGPRs``): ``min(max(floor(Total / alignTo(max(N, 1), granule)), 1), 16)``
  with Total 1536/768 (wave32/wave64) on 1.5x parts and 1024/512 otherwise, granule 24/12 or 16/8.
* Intel Xe3 (Mesa ``src/intel/compiler/brw_compiler.c`` ``brw_register_blocks`` and
  ``calculate_threads_per_eu``): field ``= ceil(N/32) - 1`` (7 when that is 6 or more), GRFs
  ``32 * (field + 1)``, threads ``min(10, floor(1024 / GRFs))``.
* Intel fixed modes (IGC ``visa/G4_Kernel.cpp`` ``GRFMode``): 128 GRFs x 8 threads, 256 GRFs x 4
  threads.
* RDNA 4 dynamic VGPRs: the number of waves that can hold ``ceil(N / B)`` blocks at the same time,
  given one slot block per enabled slot, the shared pool and the deadlock reserve as modelled in
  :mod:`.dynamic` (general grants stop at ``reserve`` free blocks; one wave may then use the
  reserve).

:func:`simulated` measures the same quantity on any allocator model by launching identical
waves until one does not fit; the tests compare the two.
"""

from .common import OP

__all__ = [
    "rdna_static_waves",
    "xe3_threads",
    "xe3_field",
    "xe_fixed_threads",
    "rdna_dynamic_waves",
    "simulated",
]


def _align(n, granule):
    return -(-n // granule) * granule


def rdna_static_waves(n, rf_vgprs=1536, wave64=False):
    """Waves per SIMD with ``n`` VGPRs per wave in non-dynamic mode (``n`` in 0..256)."""
    if not 0 <= n <= 256:
        raise ValueError(f"`n` must be from 0 to 256, not {n}")
    total = rf_vgprs // 2 if wave64 else rf_vgprs
    granule = (24 if rf_vgprs == 1536 else 16) // (2 if wave64 else 1)
    return min(max(total // _align(max(n, 1), granule), 1), 16)


def xe3_field(n):
    """The "Registers Per Thread" field for ``n`` GRFs (Mesa ``brw_register_blocks``)."""
    blocks = -(-max(n, 1) // 32) - 1
    return blocks if blocks < 6 else 7


def xe3_threads(n):
    """Threads per Xe3 vector engine with ``n`` GRFs per thread (``n`` in 0..256)."""
    if not 0 <= n <= 256:
        raise ValueError(f"`n` must be from 0 to 256, not {n}")
    return min(10, 1024 // (32 * (xe3_field(n) + 1)))


def xe_fixed_threads(n, mode="grf128"):
    """Threads per vector engine in the fixed modes; 0 when ``n`` does not fit the mode."""
    size, threads = {"grf128": (128, 8), "grf256": (256, 4)}[mode]
    return threads if n <= size else 0


def rdna_dynamic_waves(
    n, block_size=16, rf_vgprs=1536, wave_limit=16, max_blocks=8, fwd_progress=True, reserve=7
):
    """Waves that can hold ``n`` VGPRs each at the same time in dynamic mode; 0 when ``n`` is
    above the per-wave maximum."""
    blocks = max(1, -(-n // block_size))
    if blocks > max_blocks:
        return 0
    extra = blocks - 1
    if extra == 0:
        return wave_limit
    pool = rf_vgprs // block_size - wave_limit
    r = reserve if fwd_progress else 0
    general = (pool - r) // extra
    left = pool - general * extra  # free blocks once general grants stop
    holder = 1 if r and left >= extra else 0
    return min(wave_limit, general + holder)


def simulated(model, n, slots, *, grow=False):
    """Launch identical waves asking for ``n`` registers into ``slots`` slots of ``model``
    (a golden allocator model) until one fails; the number that fit. ``grow``: launch, then
    ``ALLOC n`` (the dynamic allocator)."""
    fit = 0
    idle = {"lk_wave": 0, "lk_reg": 0}
    for w in range(slots):
        out = model.step({"op": OP.LAUNCH, "wave": w, "count": n, **idle})
        if not out["ack"]:
            break
        if grow:
            out = model.step({"op": OP.ALLOC, "wave": w, "count": n, **idle})
            if not out["ack"]:
                break
        fit += 1
    return fit
