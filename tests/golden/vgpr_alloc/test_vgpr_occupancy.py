"""Occupancy functions of gpurtl.golden.vgpr_alloc.occupancy against the published tables, and
against the allocator golden models for every register count."""

import pytest

from gpurtl.golden.vgpr_alloc import occupancy as occ
from gpurtl.golden.vgpr_alloc.contiguous import static_model, xe_model
from gpurtl.golden.vgpr_alloc.dynamic import DynVgprModel

# Intel Xe3 register blocks (Mesa src/intel/compiler/brw_compiler.c brw_register_blocks, agreeing
# with IGC visa/G4_Kernel.cpp GRFMode): grf_used range -> (field, GRFs, threads per XVE)
XE3_TABLE = [
    ((1, 32), 0, 32, 10),
    ((33, 64), 1, 64, 10),
    ((65, 96), 2, 96, 10),
    ((97, 128), 3, 128, 8),
    ((129, 160), 4, 160, 6),
    ((161, 192), 5, 192, 5),
    ((193, 256), 7, 256, 4),
]
# IGC GRFMode tuples for Xe3 (visa/G4_Kernel.cpp): (GRFs, threads)
XE3_IGC = [(32, 10), (64, 10), (96, 10), (128, 8), (160, 6), (192, 5), (256, 4)]


def test_xe3_table_every_count():
    for (lo, hi), field, _grfs, threads in XE3_TABLE:
        for n in range(lo, hi + 1):
            assert occ.xe3_field(n) == field
            assert occ.xe3_threads(n) == threads, n
    for grfs, threads in XE3_IGC:
        assert occ.xe3_threads(grfs) == threads


def test_xe_fixed_modes():
    assert [occ.xe_fixed_threads(n, "grf128") for n in (1, 128, 129)] == [8, 8, 0]
    assert [occ.xe_fixed_threads(n, "grf256") for n in (1, 256)] == [4, 4]


def rdna_reference(n, total, granule):
    """B.6 written out as a loop: the largest w <= 16 with w granule-rounded allocations in the
    file (at least 1)."""
    alloc = granule
    while alloc < max(n, 1):
        alloc += granule
    waves = 1
    while waves < 16 and (waves + 1) * alloc <= total:
        waves += 1
    return waves


@pytest.mark.parametrize(
    "rf,wave64,total,granule",
    [(1536, False, 1536, 24), (1536, True, 768, 12), (1024, False, 1024, 16), (1024, True, 512, 8)],
)
def test_rdna_static_every_count(rf, wave64, total, granule):
    for n in range(0, 257):
        assert occ.rdna_static_waves(n, rf, wave64) == rdna_reference(n, total, granule), n


def test_rdna_static_anchor_points():
    # LLVM getNumWavesPerEUWithNumVGPRs (Chips and Cheese quotes it too): full 16-wave occupancy
    # on 1536-VGPR parts needs <= 96 VGPRs
    assert occ.rdna_static_waves(96) == 16 and occ.rdna_static_waves(97) == 12
    assert occ.rdna_static_waves(256) == 5 and occ.rdna_static_waves(64, 1024) == 16
    assert occ.rdna_static_waves(65, 1024) == 12


@pytest.mark.parametrize("rf,wave64", [(1536, False), (1536, True), (1024, False), (1024, True)])
def test_static_model_matches_formula(rf, wave64):
    for n in range(0, 257):
        assert occ.simulated(static_model(rf, wave64), n, 16) == occ.rdna_static_waves(
            n, rf, wave64
        )


def test_xe_models_match_formulas():
    for n in range(0, 257):
        assert occ.simulated(xe_model("xe3"), n, 10) == occ.xe3_threads(n)
        assert occ.simulated(xe_model("grf128"), n, 8) == occ.xe_fixed_threads(n, "grf128")
        assert occ.simulated(xe_model("grf256"), n, 4) == occ.xe_fixed_threads(n, "grf256")


@pytest.mark.parametrize(
    "B,rf,fwd",
    [(16, 1536, True), (32, 1536, True), (16, 1024, True), (32, 1024, False), (16, 1536, False)],
)
def test_dynamic_model_matches_formula(B, rf, fwd):
    for n in range(0, 8 * B + 1):
        model = DynVgprModel(rf, B, fwd_progress=fwd)
        assert occ.simulated(model, n, 16, grow=True) == occ.rdna_dynamic_waves(
            n, B, rf, fwd_progress=fwd
        ), n
    # the headline numbers: 128 VGPRs per wave, 16-VGPR blocks, 1536 VGPRs
    if (B, rf, fwd) == (16, 1536, True):
        assert occ.rdna_dynamic_waves(128) == 11  # 73 general blocks / 7 + the holder
