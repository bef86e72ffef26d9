"""The prefetch instructions' facts against LLVM's assembler: the GFX12 words of
``llvm/test/MC/AMDGPU/gfx12_asm_smem.s`` (written by llvm-mc, not by this project)."""

import pytest

from gpurtl.facts.inst_prefetch import (
    ENTRY_PREFETCH_LINES,
    INST_PREF_SIZE_BITS,
    INST_PREF_SIZE_UNIT,
    PREFETCH_INSTRUCTIONS,
    SET_INST_PREFETCH_DISTANCE,
    ICacheGeometry,
    encode_prefetch,
)

M0, NULL = 125, 124


def word(*octets):
    return int.from_bytes(bytes(octets), "little")


# (name, sbase, offset, soffset, sdata, llvm-mc's bytes)
LLVM_MC = [
    ("s_prefetch_inst", 12, 16, 4, 2, (0x86, 0x80, 0x04, 0xF4, 0x10, 0x00, 0x00, 0x08)),
    ("s_prefetch_inst", 14, 0, M0, 7, (0xC7, 0x81, 0x04, 0xF4, 0x00, 0x00, 0x00, 0xFA)),
    ("s_prefetch_inst", 14, 0x7FFFFF, M0, 7, (0xC7, 0x81, 0x04, 0xF4, 0xFF, 0xFF, 0x7F, 0xFA)),
    ("s_prefetch_inst", 14, -1, M0, 7, (0xC7, 0x81, 0x04, 0xF4, 0xFF, 0xFF, 0xFF, 0xFA)),
    ("s_prefetch_inst", 14, 100, M0, 31, (0xC7, 0x87, 0x04, 0xF4, 0x64, 0x00, 0x00, 0xFA)),
    ("s_prefetch_inst_pc_rel", 0, 100, 10, 7, (0xC0, 0xA1, 0x04, 0xF4, 0x64, 0x00, 0x00, 0x14)),
    ("s_prefetch_data", 18, 100, 10, 7, (0xC9, 0xC1, 0x04, 0xF4, 0x64, 0x00, 0x00, 0x14)),
    ("s_prefetch_data_pc_rel", 0, 100, 10, 7, (0xC0, 0x01, 0x05, 0xF4, 0x64, 0x00, 0x00, 0x14)),
    ("s_buffer_prefetch_data", 20, 100, 10, 7, (0xCA, 0xE1, 0x04, 0xF4, 0x64, 0x00, 0x00, 0x14)),
    ("s_buffer_prefetch_data", 20, 100, NULL, 7, (0xCA, 0xE1, 0x04, 0xF4, 0x64, 0x00, 0x00, 0xF8)),
]


@pytest.mark.parametrize("name, sbase, offset, soffset, sdata, octets", LLVM_MC)
def test_encoding_matches_llvm_mc(name, sbase, offset, soffset, sdata, octets):
    got = encode_prefetch(name, sbase=sbase, offset=offset, soffset=soffset, length=sdata)
    assert got == word(*octets)


def test_prefetches_count_on_no_wait_counter_and_pc_rel_forms_have_no_base():
    assert len(PREFETCH_INSTRUCTIONS) == 5
    for inst in PREFETCH_INSTRUCTIONS.values():
        assert inst.counter is None
        assert ("sbase" in inst.operands) == (not inst.name.endswith("_pc_rel"))
        assert inst.operands[-3:] == ("offset", "soffset", "sdata")
    kinds = {n: p.target for n, p in PREFETCH_INSTRUCTIONS.items()}
    assert [n for n, t in kinds.items() if t == "instruction"] == [
        "s_prefetch_inst",
        "s_prefetch_inst_pc_rel",
    ]


def test_entry_prefetch_figures():
    # 8 KB and 32 KB of code (the article); the descriptor field holds one unit less.
    assert {k: v * 128 for k, v in ENTRY_PREFETCH_LINES.items()} == {"rdna3": 8192, "rdna4": 32768}
    for gen, bits in INST_PREF_SIZE_BITS.items():
        assert ((1 << bits) - 1) * INST_PREF_SIZE_UNIT == ENTRY_PREFETCH_LINES[gen] * 128 - 128
    assert SET_INST_PREFETCH_DISTANCE["effect"]["rdna4"] is False


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="`name` must be one of"):
        encode_prefetch("s_prefetch_code")
    with pytest.raises(ValueError, match="`length` must be 0 to 31"):
        encode_prefetch("s_prefetch_inst", length=32)
    with pytest.raises(ValueError, match="signed 24-bit"):
        encode_prefetch("s_prefetch_inst", offset=1 << 23)
    with pytest.raises(ValueError, match="`ways` must be a power of two"):
        ICacheGeometry(ways=3)
    with pytest.raises(ValueError, match="`entry_lines` must be"):
        ICacheGeometry(entry_lines=257)
