"""RDNA 4 matrix instructions: element formats, the WMMA / SWMMAC variant table, peak rates.

Sources (cited by name; no text copied):

* LLVM ``llvm/test/MC/AMDGPU/gfx12_asm_wmma_w32.s`` (the GFX12 assembler test): the mnemonic,
  VOP3P opcode and register-tuple size of every wave32 ``V_WMMA_*`` / ``V_SWMMAC_*`` operand,
  which modifiers each accepts (``clamp`` only on the integer forms, ``neg_lo[0:1]`` as the
  signedness of A and B on the integer forms) and the range of ``index_key`` (0..1 for the
  16x16x32 forms, none for ``V_SWMMAC_I32_16X16X64_IU4``). LLVM
  ``llvm/lib/Target/AMDGPU/VOP3PInstructions.td`` defines the same profiles.
* AMD GPUOpen, "Using the Matrix Cores of AMD RDNA 4 architecture GPUs": the wave32 VGPR layouts
  of A, B and C/D for the 16x16x16 forms (one row of A / one column of B per lane, lanes 0-15
  holding K 0-7 and lanes 16-31 K 8-15; C/D one column per lane, rows 0-7 in lanes 0-15 and rows
  8-15 in lanes 16-31) and the peak FLOPS per clock per CU table (:data:`PEAK_PER_CU`).
* Chips and Cheese, "Examining AMD's RDNA 4 Changes in LLVM": the list of new FP8/BF8, IU4
  16x16x32 and SWMMAC instructions. Its reading of SWMMAC (a 32x32 result for
  ``16X16X32``) is the article's own guess; the table below follows LLVM's operand sizes, which
  give a 16x16 result: an 8-VGPR (F32) or 4-VGPR (F16) D, as for WMMA.
* OCP 8-bit floating point specification (E4M3 with no infinities and one NaN pattern per sign;
  E5M2 with IEEE infinities and NaNs) for RDNA 4's FP8/BF8; the FNUZ variants (bias 8 and 16,
  a single NaN at 0x80, no negative zero) are CDNA 3's and are here for the MMA-Sim presets.

Inferred, not found in a public source (each repeated where it is used):

* The K layout of operands with K = 32 or 64 per lane: two (four) 16-deep blocks, each laid out
  as the 16x16x16 operand, in consecutive VGPRs (what the register-tuple sizes allow; the LLVM
  intrinsics pass them as one flat vector).
* The sparse index: two bits per stored A element, in the order the lane holds the elements
  (element j at bits 2j..2j+1 of the lane's index half picked by ``index_key``); each pair of
  stored values of a row comes from one group of four logical K, and its index is the position
  within that group.
"""

from dataclasses import dataclass

__all__ = [
    "FloatFormat",
    "IntFormat",
    "FORMATS",
    "Variant",
    "VARIANTS",
    "VARIANT_BY_NAME",
    "FAMILIES",
    "PEAK_PER_CU",
    "WAVE",
    "TILE",
    "LANE_BITS",
]

#: Lanes of a wave (the tables are wave32's) and the side of every result tile.
WAVE = 32
TILE = 16
LANE_BITS = 32


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point element format.

    ``kind`` is ``"ieee"`` (infinities and NaNs at the all-ones exponent), ``"fn"`` (OCP E4M3: no
    infinities, NaN only with every exponent and mantissa bit set) or ``"fnuz"`` (no infinities,
    no negative zero, the one NaN is the pattern with only the sign bit set).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    kind: str = "ieee"

    @property
    def bits(self):
        return 1 + self.exp_bits + self.man_bits

    @property
    def is_float(self):
        return True

    @property
    def emin(self):
        """Exponent of the smallest normal number (also the subnormals' scale exponent)."""
        return 1 - self.bias


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement or unsigned integer element (signedness is chosen per instruction)."""

    name: str
    bits: int

    @property
    def is_float(self):
        return False


FORMATS = {
    "f32": FloatFormat("f32", 8, 23, 127),
    "f16": FloatFormat("f16", 5, 10, 15),
    "bf16": FloatFormat("bf16", 8, 7, 127),
    "fp8": FloatFormat("fp8", 4, 3, 7, "fn"),  # OCP E4M3 (RDNA 4)
    "bf8": FloatFormat("bf8", 5, 2, 15),  # OCP E5M2 (RDNA 4)
    "fp8_fnuz": FloatFormat("fp8_fnuz", 4, 3, 8, "fnuz"),  # CDNA 3 FP8
    "bf8_fnuz": FloatFormat("bf8_fnuz", 5, 2, 16, "fnuz"),  # CDNA 3 BF8
    "iu8": IntFormat("iu8", 8),
    "iu4": IntFormat("iu4", 4),
    "i32": IntFormat("i32", 32),
}


@dataclass(frozen=True)
class Variant:
    """One wave32 instruction: shapes in elements, operand sizes in VGPRs.

    ``k`` is the logical depth; a sparse (SWMMAC) variant stores A as ``16 x k/2`` with a 2-bit
    index per stored element. ``index_keys`` is the number of values ``index_key`` may take (1: the
    whole index VGPR is used).
    """

    name: str
    opcode: int
    a: str
    b: str
    cd: str
    k: int
    sparse: bool
    a_vgprs: int
    b_vgprs: int
    cd_vgprs: int
    index_keys: int = 1

    @property
    def k_stored(self):
        """Depth of A as stored in its VGPRs (half of ``k`` for SWMMAC)."""
        return self.k // 2 if self.sparse else self.k

    @property
    def is_int(self):
        return self.cd == "i32"

    @property
    def products(self):
        """Multiplications the instruction needs (stored A elements x columns of B)."""
        return TILE * TILE * self.k_stored

    @property
    def flops(self):
        """Operations as vendors count them: 2 per logical multiply-add (dense equivalent)."""
        return 2 * TILE * TILE * self.k


def _v(name, opcode, a, b, cd, k, sparse, av, bv, cv, keys=1):
    return Variant(name, opcode, a, b, cd, k, sparse, av, bv, cv, keys)


#: Every wave32 WMMA / SWMMAC instruction of GFX12 (LLVM gfx12_asm_wmma_w32.s: opcode = bits
#: 16..22 of the VOP3P word, register tuple sizes of SRC0 (A), SRC1 (B), VDST/SRC2 (C/D)).
VARIANTS = (
    _v("v_wmma_f32_16x16x16_f16", 0x40, "f16", "f16", "f32", 16, False, 4, 4, 8),
    _v("v_wmma_f32_16x16x16_bf16", 0x41, "bf16", "bf16", "f32", 16, False, 4, 4, 8),
    _v("v_wmma_f16_16x16x16_f16", 0x42, "f16", "f16", "f16", 16, False, 4, 4, 4),
    _v("v_wmma_bf16_16x16x16_bf16", 0x43, "bf16", "bf16", "bf16", 16, False, 4, 4, 4),
    _v("v_wmma_i32_16x16x16_iu8", 0x44, "iu8", "iu8", "i32", 16, False, 2, 2, 8),
    _v("v_wmma_i32_16x16x16_iu4", 0x45, "iu4", "iu4", "i32", 16, False, 1, 1, 8),
    _v("v_wmma_f32_16x16x16_fp8_fp8", 0x46, "fp8", "fp8", "f32", 16, False, 2, 2, 8),
    _v("v_wmma_f32_16x16x16_fp8_bf8", 0x47, "fp8", "bf8", "f32", 16, False, 2, 2, 8),
    _v("v_wmma_f32_16x16x16_bf8_fp8", 0x48, "bf8", "fp8", "f32", 16, False, 2, 2, 8),
    _v("v_wmma_f32_16x16x16_bf8_bf8", 0x49, "bf8", "bf8", "f32", 16, False, 2, 2, 8),
    _v("v_wmma_i32_16x16x32_iu4", 0x4A, "iu4", "iu4", "i32", 32, False, 2, 2, 8),
    _v("v_swmmac_f32_16x16x32_f16", 0x50, "f16", "f16", "f32", 32, True, 4, 8, 8, 2),
    _v("v_swmmac_f32_16x16x32_bf16", 0x51, "bf16", "bf16", "f32", 32, True, 4, 8, 8, 2),
    _v("v_swmmac_f16_16x16x32_f16", 0x52, "f16", "f16", "f16", 32, True, 4, 8, 4, 2),
    _v("v_swmmac_bf16_16x16x32_bf16", 0x53, "bf16", "bf16", "bf16", 32, True, 4, 8, 4, 2),
    _v("v_swmmac_i32_16x16x32_iu8", 0x54, "iu8", "iu8", "i32", 32, True, 2, 4, 8, 2),
    _v("v_swmmac_i32_16x16x32_iu4", 0x55, "iu4", "iu4", "i32", 32, True, 1, 2, 8, 2),
    _v("v_swmmac_i32_16x16x64_iu4", 0x56, "iu4", "iu4", "i32", 64, True, 2, 4, 8, 1),
    _v("v_swmmac_f32_16x16x32_fp8_fp8", 0x57, "fp8", "fp8", "f32", 32, True, 2, 4, 8, 2),
    _v("v_swmmac_f32_16x16x32_fp8_bf8", 0x58, "fp8", "bf8", "f32", 32, True, 2, 4, 8, 2),
    _v("v_swmmac_f32_16x16x32_bf8_fp8", 0x59, "bf8", "fp8", "f32", 32, True, 2, 4, 8, 2),
    _v("v_swmmac_f32_16x16x32_bf8_bf8", 0x5A, "bf8", "bf8", "f32", 32, True, 2, 4, 8, 2),
)

VARIANT_BY_NAME = {v.name: v for v in VARIANTS}

#: Hardware families: one matrix-core build per family runs every variant listed (its ``op``
#: field is the index into the tuple). Named by input format and accumulator.
FAMILIES = {
    "f16_f32": ("v_wmma_f32_16x16x16_f16", "v_swmmac_f32_16x16x32_f16"),
    "bf16_f32": ("v_wmma_f32_16x16x16_bf16", "v_swmmac_f32_16x16x32_bf16"),
    "f16_f16": ("v_wmma_f16_16x16x16_f16", "v_swmmac_f16_16x16x32_f16"),
    "bf16_bf16": ("v_wmma_bf16_16x16x16_bf16", "v_swmmac_bf16_16x16x32_bf16"),
    "fp8_f32": (
        "v_wmma_f32_16x16x16_fp8_fp8",
        "v_wmma_f32_16x16x16_fp8_bf8",
        "v_wmma_f32_16x16x16_bf8_fp8",
        "v_wmma_f32_16x16x16_bf8_bf8",
        "v_swmmac_f32_16x16x32_fp8_fp8",
        "v_swmmac_f32_16x16x32_fp8_bf8",
        "v_swmmac_f32_16x16x32_bf8_fp8",
        "v_swmmac_f32_16x16x32_bf8_bf8",
    ),
    "iu8_i32": ("v_wmma_i32_16x16x16_iu8", "v_swmmac_i32_16x16x32_iu8"),
    "iu4_i32": (
        "v_wmma_i32_16x16x16_iu4",
        "v_wmma_i32_16x16x32_iu4",
        "v_swmmac_i32_16x16x32_iu4",
        "v_swmmac_i32_16x16x64_iu4",
    ),
}

#: GPUOpen "Using the Matrix Cores of AMD RDNA 4 architecture GPUs", table of theoretical
#: FLOPS / clock / CU (dense): product -> {format: value}; ``None`` = not supported. A copy of the
#: same article on another site prints 2048 for the RX 9070 XT's BF16; the figure here (1024,
#: equal to FP16) is the one the article's other copies and the project issue give.
PEAK_PER_CU = {
    "RX 6950 XT (RDNA 2)": {"f16": 256, "bf16": None, "iu8": 512},
    "RX 7900 XTX (RDNA 3)": {"f16": 512, "bf16": 512, "iu8": 512},
    "RX 9070 XT (RDNA 4)": {"f16": 1024, "bf16": 1024, "iu8": 2048},
}
