"""VGPR layouts of every RDNA 4 WMMA / SWMMAC variant: round trips and placement spot checks."""

import numpy as np
import pytest

from gpurtl.facts.matrix import FAMILIES, FORMATS, VARIANTS, operand_chunk
from gpurtl.golden.matrix import layouts


@pytest.mark.parametrize("v", VARIANTS, ids=lambda v: v.name)
def test_round_trip_every_variant(v):
    """Random A (stored), B, C and sparse index -> words -> the same matrices, with the
    register counts LLVM gives for each operand."""
    rng = np.random.default_rng(v.opcode)
    wa, wb, wc = FORMATS[v.a].bits, FORMATS[v.b].bits, FORMATS[v.cd].bits
    a = rng.integers(0, 1 << wa, (3, 16, v.k_stored))
    b = rng.integers(0, 1 << wb, (3, v.k, 16))
    c = rng.integers(0, 1 << wc, (3, 16, 16))
    wa_, wb_, wc_ = layouts.pack_a(v, a), layouts.pack_b(v, b), layouts.pack_cd(c, wc)
    assert wa_.shape == (3, v.a_vgprs, 32)
    assert wb_.shape == (3, v.b_vgprs, 32)
    assert wc_.shape == (3, v.cd_vgprs, 32)
    assert (wa_ >= 0).all() and (wa_ < 1 << 32).all()
    assert (layouts.unpack_a(v, wa_) == a).all()
    assert (layouts.unpack_b(v, wb_) == b).all()
    assert (layouts.unpack_cd(wc_, wc) == c).all()
    if v.sparse:
        idx = rng.integers(0, 4, (3, 16, v.k_stored))
        chunk = operand_chunk(v, "a")
        for key in range(v.index_keys):
            other = rng.integers(0, 1 << 32, (3, 32))
            words = layouts.pack_index(idx, key, into=other, chunk=chunk)
            assert (layouts.unpack_index(words, v.k_stored, key, chunk=chunk) == idx).all()
            if v.index_keys == 2:  # the other half of the VGPR is left alone
                keep = 0xFFFF << (16 * (1 - key))
                assert ((words & keep) == (other & keep)).all()


def test_families_cover_every_variant():
    names = [n for family in FAMILIES.values() for n in family]
    assert sorted(names) == sorted(v.name for v in VARIANTS)
    assert len(VARIANTS) == 22


#: Where single elements sit, as AMD's Matrix Instruction Calculator prints them
#: (``matrix_calculator.py --architecture rdna4 --instruction NAME -A|-B|-D|-k [--opsel KEY]
#: --register-layout --csv``, ROCm/amd_matrix_instruction_calculator, May 2025): per instruction,
#: ``(operand, i, j, vgpr, lane, bit)``: ``a`` = A[i][j] (SWMMAC: logical column j, the first of
#: its group of four, whose two stored values sit at ``bit`` and ``bit + width``), ``b`` =
#: B[i][j], ``d`` = D[i][j], ``k0`` / ``k1`` = the two 2-bit indices of A[i][j..j+3] under
#: ``index_key`` 0 / 1. The whole tables of all 22 instructions (25 088 positions) agree with
#: :mod:`gpurtl.golden.matrix.layouts`; these rows are a sample kept in the repository.
CALCULATOR = {
    "v_wmma_f32_16x16x16_f16": [
        ("a", 0, 9, 2, 0, 16),
        ("a", 9, 2, 1, 9, 0),
        ("a", 11, 4, 0, 27, 0),
        ("a", 13, 12, 2, 29, 0),
        ("a", 15, 15, 3, 31, 16),
        ("b", 0, 3, 0, 3, 0),
        ("b", 6, 8, 1, 24, 0),
        ("b", 7, 14, 1, 30, 16),
        ("b", 14, 0, 3, 16, 0),
        ("b", 15, 15, 3, 31, 16),
        ("d", 2, 15, 2, 15, 0),
        ("d", 13, 0, 5, 16, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_f32_16x16x16_bf16": [
        ("a", 1, 6, 1, 17, 0),
        ("a", 1, 11, 3, 1, 16),
        ("a", 5, 6, 1, 21, 0),
        ("a", 13, 11, 3, 13, 16),
        ("a", 15, 15, 3, 31, 16),
        ("b", 2, 15, 1, 15, 0),
        ("b", 5, 15, 0, 31, 16),
        ("b", 9, 10, 2, 10, 16),
        ("b", 11, 11, 3, 11, 16),
        ("b", 15, 15, 3, 31, 16),
        ("d", 5, 5, 5, 5, 0),
        ("d", 14, 5, 6, 21, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_f16_16x16x16_f16": [
        ("a", 1, 8, 2, 1, 0),
        ("a", 3, 2, 1, 3, 0),
        ("a", 3, 13, 2, 19, 16),
        ("a", 10, 6, 1, 26, 0),
        ("a", 15, 15, 3, 31, 16),
        ("b", 3, 11, 1, 11, 16),
        ("b", 8, 10, 2, 10, 0),
        ("b", 9, 9, 2, 9, 16),
        ("b", 14, 6, 3, 22, 0),
        ("b", 15, 15, 3, 31, 16),
        ("d", 3, 3, 1, 3, 16),
        ("d", 8, 4, 0, 20, 0),
        ("d", 15, 15, 3, 31, 16),
    ],
    "v_wmma_bf16_16x16x16_bf16": [
        ("a", 3, 12, 2, 19, 0),
        ("a", 5, 14, 3, 21, 0),
        ("a", 10, 4, 0, 26, 0),
        ("a", 15, 7, 1, 31, 16),
        ("a", 15, 15, 3, 31, 16),
        ("b", 0, 5, 0, 5, 0),
        ("b", 1, 1, 0, 1, 16),
        ("b", 7, 0, 1, 16, 16),
        ("b", 13, 12, 2, 28, 16),
        ("b", 15, 15, 3, 31, 16),
        ("d", 7, 1, 3, 1, 16),
        ("d", 14, 2, 3, 18, 0),
        ("d", 15, 15, 3, 31, 16),
    ],
    "v_wmma_i32_16x16x16_iu8": [
        ("a", 2, 8, 0, 18, 0),
        ("a", 6, 1, 0, 6, 8),
        ("a", 11, 0, 0, 11, 0),
        ("a", 12, 15, 1, 28, 24),
        ("a", 15, 15, 1, 31, 24),
        ("b", 3, 5, 0, 5, 24),
        ("b", 6, 2, 1, 2, 16),
        ("b", 14, 6, 1, 22, 16),
        ("b", 14, 9, 1, 25, 16),
        ("b", 15, 15, 1, 31, 24),
        ("d", 3, 13, 3, 13, 0),
        ("d", 7, 8, 7, 8, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_i32_16x16x16_iu4": [
        ("a", 5, 0, 0, 5, 0),
        ("a", 13, 2, 0, 13, 8),
        ("a", 13, 5, 0, 13, 20),
        ("a", 14, 10, 0, 30, 8),
        ("a", 15, 15, 0, 31, 28),
        ("b", 7, 9, 0, 9, 28),
        ("b", 9, 1, 0, 17, 4),
        ("b", 9, 3, 0, 19, 4),
        ("b", 13, 13, 0, 29, 20),
        ("b", 15, 15, 0, 31, 28),
        ("d", 0, 4, 0, 4, 0),
        ("d", 10, 13, 2, 29, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_f32_16x16x16_fp8_fp8": [
        ("a", 2, 10, 0, 18, 16),
        ("a", 3, 7, 1, 3, 24),
        ("a", 7, 5, 1, 7, 8),
        ("a", 15, 14, 1, 31, 16),
        ("a", 15, 15, 1, 31, 24),
        ("b", 0, 4, 0, 4, 0),
        ("b", 8, 0, 0, 16, 0),
        ("b", 10, 12, 0, 28, 16),
        ("b", 12, 6, 1, 22, 0),
        ("b", 15, 15, 1, 31, 24),
        ("d", 0, 5, 0, 5, 0),
        ("d", 14, 13, 6, 29, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_f32_16x16x16_fp8_bf8": [
        ("a", 2, 13, 1, 18, 8),
        ("a", 5, 9, 0, 21, 8),
        ("a", 8, 2, 0, 8, 16),
        ("a", 8, 15, 1, 24, 24),
        ("a", 15, 15, 1, 31, 24),
        ("b", 0, 14, 0, 14, 0),
        ("b", 7, 1, 1, 1, 24),
        ("b", 13, 9, 1, 25, 8),
        ("b", 15, 12, 1, 28, 24),
        ("b", 15, 15, 1, 31, 24),
        ("d", 10, 13, 2, 29, 0),
        ("d", 11, 9, 3, 25, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_f32_16x16x16_bf8_fp8": [
        ("a", 1, 13, 1, 17, 8),
        ("a", 5, 12, 1, 21, 0),
        ("a", 8, 10, 0, 24, 16),
        ("a", 15, 8, 0, 31, 0),
        ("a", 15, 15, 1, 31, 24),
        ("b", 8, 2, 0, 18, 0),
        ("b", 8, 4, 0, 20, 0),
        ("b", 11, 3, 0, 19, 24),
        ("b", 12, 6, 1, 22, 0),
        ("b", 15, 15, 1, 31, 24),
        ("d", 8, 14, 0, 30, 0),
        ("d", 14, 3, 6, 19, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_f32_16x16x16_bf8_bf8": [
        ("a", 0, 1, 0, 0, 8),
        ("a", 1, 13, 1, 17, 8),
        ("a", 7, 15, 1, 23, 24),
        ("a", 8, 3, 0, 8, 24),
        ("a", 15, 15, 1, 31, 24),
        ("b", 2, 8, 0, 8, 16),
        ("b", 4, 2, 1, 2, 0),
        ("b", 5, 12, 1, 12, 8),
        ("b", 6, 11, 1, 11, 16),
        ("b", 15, 15, 1, 31, 24),
        ("d", 2, 5, 2, 5, 0),
        ("d", 11, 9, 3, 25, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_wmma_i32_16x16x32_iu4": [
        ("a", 1, 7, 0, 1, 28),
        ("a", 4, 8, 1, 4, 0),
        ("a", 5, 1, 0, 5, 4),
        ("a", 9, 30, 1, 25, 24),
        ("a", 15, 31, 1, 31, 28),
        ("b", 2, 3, 0, 3, 8),
        ("b", 8, 11, 1, 11, 0),
        ("b", 18, 1, 0, 17, 8),
        ("b", 20, 0, 0, 16, 16),
        ("b", 31, 15, 1, 31, 28),
        ("d", 2, 5, 2, 5, 0),
        ("d", 6, 6, 6, 6, 0),
        ("d", 15, 15, 7, 31, 0),
    ],
    "v_swmmac_f32_16x16x32_f16": [
        ("a", 7, 24, 2, 23, 0),
        ("a", 9, 28, 3, 25, 0),
        ("a", 11, 12, 1, 27, 0),
        ("a", 13, 20, 3, 13, 0),
        ("a", 15, 28, 3, 31, 0),
        ("b", 2, 15, 1, 15, 0),
        ("b", 8, 11, 0, 27, 0),
        ("b", 24, 9, 4, 25, 0),
        ("b", 25, 11, 4, 27, 16),
        ("b", 31, 15, 7, 31, 16),
        ("d", 6, 5, 6, 5, 0),
        ("d", 6, 10, 6, 10, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 1, 0, 0, 1, 0),
        ("k0", 13, 24, 0, 29, 8),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 10, 24, 0, 26, 24),
        ("k1", 15, 8, 0, 31, 16),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_f32_16x16x32_bf16": [
        ("a", 1, 16, 2, 1, 0),
        ("a", 7, 20, 3, 7, 0),
        ("a", 13, 20, 3, 13, 0),
        ("a", 14, 8, 0, 30, 0),
        ("a", 15, 28, 3, 31, 0),
        ("b", 25, 11, 4, 27, 16),
        ("b", 27, 5, 5, 21, 16),
        ("b", 28, 6, 6, 22, 0),
        ("b", 31, 0, 7, 16, 16),
        ("b", 31, 15, 7, 31, 16),
        ("d", 13, 2, 5, 18, 0),
        ("d", 14, 0, 6, 16, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 8, 0, 0, 8, 0),
        ("k0", 12, 24, 0, 28, 8),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 1, 24, 0, 17, 24),
        ("k1", 12, 20, 0, 12, 28),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_f16_16x16x32_f16": [
        ("a", 2, 24, 2, 18, 0),
        ("a", 4, 4, 1, 4, 0),
        ("a", 8, 8, 0, 24, 0),
        ("a", 14, 4, 1, 14, 0),
        ("a", 15, 28, 3, 31, 0),
        ("b", 1, 6, 0, 6, 16),
        ("b", 12, 11, 2, 27, 0),
        ("b", 19, 3, 5, 3, 16),
        ("b", 30, 4, 7, 20, 0),
        ("b", 31, 15, 7, 31, 16),
        ("d", 9, 8, 0, 24, 16),
        ("d", 9, 13, 0, 29, 16),
        ("d", 15, 15, 3, 31, 16),
        ("k0", 10, 0, 0, 10, 0),
        ("k0", 15, 16, 0, 15, 8),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 2, 8, 0, 18, 16),
        ("k1", 7, 8, 0, 23, 16),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_bf16_16x16x32_bf16": [
        ("a", 1, 28, 3, 17, 0),
        ("a", 2, 4, 1, 2, 0),
        ("a", 3, 16, 2, 3, 0),
        ("a", 8, 4, 1, 8, 0),
        ("a", 15, 28, 3, 31, 0),
        ("b", 0, 6, 0, 6, 0),
        ("b", 2, 8, 1, 8, 0),
        ("b", 4, 4, 2, 4, 0),
        ("b", 17, 13, 4, 13, 16),
        ("b", 31, 15, 7, 31, 16),
        ("d", 5, 6, 2, 6, 16),
        ("d", 15, 1, 3, 17, 16),
        ("d", 15, 15, 3, 31, 16),
        ("k0", 0, 24, 0, 16, 8),
        ("k0", 4, 16, 0, 4, 8),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 1, 0, 0, 1, 16),
        ("k1", 1, 24, 0, 17, 24),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_i32_16x16x32_iu8": [
        ("a", 0, 20, 0, 16, 16),
        ("a", 4, 8, 1, 4, 0),
        ("a", 13, 0, 0, 13, 0),
        ("a", 15, 4, 0, 15, 16),
        ("a", 15, 28, 1, 31, 16),
        ("b", 10, 6, 2, 6, 16),
        ("b", 18, 1, 0, 17, 16),
        ("b", 19, 3, 0, 19, 24),
        ("b", 29, 10, 3, 26, 8),
        ("b", 31, 15, 3, 31, 24),
        ("d", 4, 3, 4, 3, 0),
        ("d", 4, 5, 4, 5, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 5, 12, 0, 5, 12),
        ("k0", 13, 12, 0, 13, 12),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 2, 16, 0, 18, 16),
        ("k1", 3, 8, 0, 3, 24),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_i32_16x16x32_iu4": [
        ("a", 3, 24, 0, 19, 16),
        ("a", 6, 24, 0, 22, 16),
        ("a", 10, 4, 0, 10, 8),
        ("a", 11, 4, 0, 11, 8),
        ("a", 15, 28, 0, 31, 24),
        ("b", 10, 7, 1, 7, 8),
        ("b", 15, 4, 1, 4, 28),
        ("b", 23, 13, 0, 29, 28),
        ("b", 29, 6, 1, 22, 20),
        ("b", 31, 15, 1, 31, 28),
        ("d", 3, 4, 3, 4, 0),
        ("d", 10, 1, 2, 17, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 4, 4, 0, 4, 4),
        ("k0", 11, 0, 0, 11, 0),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 1, 8, 0, 1, 24),
        ("k1", 1, 28, 0, 17, 28),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_i32_16x16x64_iu4": [
        ("a", 2, 52, 1, 18, 8),
        ("a", 6, 56, 1, 22, 16),
        ("a", 8, 44, 0, 24, 24),
        ("a", 10, 36, 0, 26, 8),
        ("a", 15, 60, 1, 31, 24),
        ("b", 22, 2, 2, 2, 24),
        ("b", 48, 0, 2, 16, 0),
        ("b", 51, 12, 2, 28, 12),
        ("b", 61, 3, 3, 19, 20),
        ("b", 63, 15, 3, 31, 28),
        ("d", 0, 1, 0, 1, 0),
        ("d", 10, 4, 2, 20, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 3, 40, 0, 19, 8),
        ("k0", 12, 16, 0, 12, 16),
        ("k0", 15, 60, 0, 31, 28),
    ],
    "v_swmmac_f32_16x16x32_fp8_fp8": [
        ("a", 4, 16, 0, 20, 0),
        ("a", 8, 24, 1, 24, 0),
        ("a", 12, 8, 1, 12, 0),
        ("a", 13, 16, 0, 29, 0),
        ("a", 15, 28, 1, 31, 16),
        ("b", 0, 10, 0, 10, 0),
        ("b", 19, 2, 0, 18, 24),
        ("b", 21, 4, 1, 20, 8),
        ("b", 22, 1, 1, 17, 16),
        ("b", 31, 15, 3, 31, 24),
        ("d", 8, 5, 0, 21, 0),
        ("d", 13, 2, 5, 18, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 3, 0, 0, 3, 0),
        ("k0", 7, 20, 0, 23, 4),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 2, 16, 0, 18, 16),
        ("k1", 13, 12, 0, 13, 28),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_f32_16x16x32_fp8_bf8": [
        ("a", 4, 28, 1, 20, 16),
        ("a", 6, 8, 1, 6, 0),
        ("a", 8, 12, 1, 8, 16),
        ("a", 10, 24, 1, 26, 0),
        ("a", 15, 28, 1, 31, 16),
        ("b", 3, 12, 0, 12, 24),
        ("b", 14, 13, 3, 13, 16),
        ("b", 20, 3, 1, 19, 0),
        ("b", 21, 11, 1, 27, 8),
        ("b", 31, 15, 3, 31, 24),
        ("d", 2, 1, 2, 1, 0),
        ("d", 4, 3, 4, 3, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 5, 4, 0, 5, 4),
        ("k0", 13, 16, 0, 29, 0),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 4, 20, 0, 20, 20),
        ("k1", 5, 4, 0, 5, 20),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_f32_16x16x32_bf8_fp8": [
        ("a", 6, 24, 1, 22, 0),
        ("a", 9, 0, 0, 9, 0),
        ("a", 9, 28, 1, 25, 16),
        ("a", 11, 20, 0, 27, 16),
        ("a", 15, 28, 1, 31, 16),
        ("b", 2, 4, 0, 4, 16),
        ("b", 10, 1, 2, 1, 16),
        ("b", 29, 12, 3, 28, 8),
        ("b", 30, 0, 3, 16, 16),
        ("b", 31, 15, 3, 31, 24),
        ("d", 7, 4, 7, 4, 0),
        ("d", 11, 14, 3, 30, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 6, 0, 0, 6, 0),
        ("k0", 8, 12, 0, 8, 12),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 3, 16, 0, 19, 16),
        ("k1", 15, 0, 0, 15, 16),
        ("k1", 15, 28, 0, 31, 28),
    ],
    "v_swmmac_f32_16x16x32_bf8_bf8": [
        ("a", 3, 12, 1, 3, 16),
        ("a", 5, 24, 1, 21, 0),
        ("a", 8, 16, 0, 24, 0),
        ("a", 13, 12, 1, 13, 16),
        ("a", 15, 28, 1, 31, 16),
        ("b", 17, 5, 0, 21, 8),
        ("b", 17, 7, 0, 23, 8),
        ("b", 24, 0, 2, 16, 0),
        ("b", 26, 3, 2, 19, 16),
        ("b", 31, 15, 3, 31, 24),
        ("d", 0, 9, 0, 9, 0),
        ("d", 6, 7, 6, 7, 0),
        ("d", 15, 15, 7, 31, 0),
        ("k0", 2, 8, 0, 2, 8),
        ("k0", 6, 24, 0, 22, 8),
        ("k0", 15, 28, 0, 31, 12),
        ("k1", 6, 0, 0, 6, 16),
        ("k1", 13, 12, 0, 13, 28),
        ("k1", 15, 28, 0, 31, 28),
    ],
}


def _where(words):
    """(vgpr, lane, bit) of the only set bit in ``words``."""
    found = np.argwhere(words != 0)
    assert len(found) == 1, found
    vgpr, lane = (int(x) for x in found[0])
    word = int(words[vgpr, lane])
    return vgpr, lane, (word & -word).bit_length() - 1


def _one(shape, i, j):
    m = np.zeros(shape, np.int64)
    m[i, j] = 1
    return m


@pytest.mark.parametrize("v", VARIANTS, ids=lambda v: v.name)
def test_positions_match_the_calculator(v):
    wa = FORMATS[v.a].bits
    checked = set()
    for operand, i, j, vgpr, lane, bit in CALCULATOR[v.name]:
        checked.add(operand[0])
        if operand == "a" and v.sparse:  # logical group j // 4: stored 2g and 2g + 1
            s = 2 * (j // 4)
            got = [_where(layouts.pack_a(v, _one((16, v.k_stored), i, s + t))) for t in (0, 1)]
            assert got == [(vgpr, lane, bit), (vgpr, lane, bit + wa)], (operand, i, j)
        elif operand == "a":
            assert _where(layouts.pack_a(v, _one((16, v.k), i, j))) == (vgpr, lane, bit)
        elif operand == "b":
            assert _where(layouts.pack_b(v, _one((v.k, 16), i, j))) == (vgpr, lane, bit)
        elif operand == "d":
            got = _where(layouts.pack_cd(_one((16, 16), i, j), FORMATS[v.cd].bits))
            assert got == (vgpr, lane, bit), (operand, i, j)
        else:
            key, s, chunk = int(operand[1]), 2 * (j // 4), operand_chunk(v, "a")
            got = [
                _where(layouts.pack_index(_one((16, v.k_stored), i, s + t), key, chunk=chunk)[None])
                for t in (0, 1)
            ]
            assert got == [(vgpr, lane, bit), (vgpr, lane, bit + 2)], (operand, i, j)
    assert checked == ({"a", "b", "d", "k"} if v.sparse else {"a", "b", "d"})


def test_a_wrong_layout_is_caught():
    """The sample tells the layouts apart: 8-element chunks for 16-bit A (GPUOpen's figure read
    as lanes 0-15 holding K 0-7) fail it."""
    v = VARIANTS[0]
    (_, i, j, vgpr, lane, bit) = next(
        e for e in CALCULATOR[v.name] if e[0] == "a" and e[2] % 8 >= 4
    )
    wrong = layouts.pack_rows(_one((16, v.k), i, j), 16, chunk=8)
    assert _where(wrong) != (vgpr, lane, bit)


def test_compress_expand_and_selection():
    rng = np.random.default_rng(5)
    logical = rng.integers(1, 1 << 16, (2, 16, 32))
    keep = np.zeros((2, 16, 8, 4), bool)
    for pos in np.ndindex(2, 16, 8):
        keep[pos][rng.choice(4, 2, replace=False)] = True
    keep = keep.reshape(2, 16, 32)
    stored, idx = layouts.compress(logical, keep)
    assert stored.shape == (2, 16, 16)
    assert (layouts.expand(stored, idx) == np.where(keep, logical, 0)).all()
    b = rng.integers(0, 1 << 16, (2, 32, 16))
    sel = layouts.select_b(b, idx)  # (2, m, n, s)
    m, n, s = 7, 11, 13
    assert sel[1, m, n, s] == b[1, 4 * (s // 2) + idx[1, m, s], n]
    with pytest.raises(ValueError, match="exactly two"):
        layouts.compress(logical, np.ones_like(keep))
    with pytest.raises(ValueError, match="must differ"):
        layouts.expand(stored, np.zeros_like(idx))
