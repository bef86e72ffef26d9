"""VGPR layouts of every RDNA 4 WMMA / SWMMAC variant: round trips and placement spot checks."""

import numpy as np
import pytest

from gpurtl.facts.matrix import FAMILIES, FORMATS, VARIANTS
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
    wa_ = layouts.pack_rows(a, wa)
    wb_ = layouts.pack_rows(np.swapaxes(b, -1, -2), wb)
    wc_ = layouts.pack_cd(c, wc)
    assert wa_.shape == (3, v.a_vgprs, 32)
    assert wb_.shape == (3, v.b_vgprs, 32)
    assert wc_.shape == (3, v.cd_vgprs, 32)
    assert (wa_ >= 0).all() and (wa_ < 1 << 32).all()
    assert (layouts.unpack_rows(wa_, wa, v.k_stored) == a).all()
    assert (np.swapaxes(layouts.unpack_rows(wb_, wb, v.k), -1, -2) == b).all()
    assert (layouts.unpack_cd(wc_, wc) == c).all()
    if v.sparse:
        idx = rng.integers(0, 4, (3, 16, v.k_stored))
        for key in range(v.index_keys):
            other = rng.integers(0, 1 << 32, (3, 32))
            words = layouts.pack_index(idx, key, into=other)
            assert (layouts.unpack_index(words, v.k_stored, key) == idx).all()
            if v.index_keys == 2:  # the other half of the VGPR is left alone
                keep = 0xFFFF << (16 * (1 - key))
                assert ((words & keep) == (other & keep)).all()


def test_families_cover_every_variant():
    names = [n for family in FAMILIES.values() for n in family]
    assert sorted(names) == sorted(v.name for v in VARIANTS)
    assert len(VARIANTS) == 22


def test_placement_spot_checks():
    """Where single elements land (the GPUOpen layout of the 16x16x16 operands)."""
    a = np.zeros((16, 16), np.int64)
    a[3, 9] = 0xABCD  # row 3, K 9 -> lane 16 + 3, element 1 -> VGPR 0, high half
    w = layouts.pack_rows(a, 16)
    assert w[0, 19] == 0xABCD << 16 and w.sum() == 0xABCD << 16
    c = np.zeros((16, 16), np.int64)
    c[10, 5] = 7  # row 10, column 5 -> lane 16 + 5, element 2 -> VGPR 2
    w = layouts.pack_cd(c, 32)
    assert w[2, 21] == 7 and w.sum() == 7
    w = layouts.pack_cd(c, 16)  # 16-bit: element 2 -> VGPR 1, low half
    assert w[1, 21] == 7 and w.sum() == 7
    b = np.zeros(
        (32, 16), np.int64
    )  # K = 32 B (SWMMAC f16): K 20 of column 4 -> lane 4, element 12
    b[20, 4] = 0x1234
    w = layouts.pack_rows(b.T, 16)
    assert w.shape == (8, 32) and w[6, 4] == 0x1234 and w.sum() == 0x1234


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
