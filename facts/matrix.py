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

from dataclasses import dataclass, replace

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
    "Algorithm",
    "Preset",
    "PRESETS",
    "DEFAULT_PRESET",
    "preset",
    "INPUT_CLASSES",
    "family_variants",
    "family_shape",
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


def family_variants(family):
    """The :class:`Variant` objects of ``family``, in ``op`` order."""
    try:
        names = FAMILIES[family]
    except KeyError:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}") from None
    return tuple(VARIANT_BY_NAME[name] for name in names)


def family_shape(family):
    """``dict(a=, b=, c=, is_int=, ops=)``: the VGPR counts a family's transactions carry."""
    vs = family_variants(family)
    return {
        "a": max(v.a_vgprs for v in vs),
        "b": max(v.b_vgprs for v in vs),
        "c": max(v.cd_vgprs for v in vs),
        "is_int": vs[0].is_int,
        "ops": len(vs),
    }


# --- accumulation algorithms ---------------------------------------------------------------------
#
# The arithmetic is evaluated by gpurtl.golden.matrix.arith (see its module doc string for what
# each parameter means) and built by gpurtl.hdl.matrix; both read the parameters from here.
@dataclass(frozen=True)
class Algorithm:
    """One floating-point accumulation algorithm (see :mod:`gpurtl.golden.matrix.arith`).

    Parameters
    ----------
    name : str
    structure : str
        ``"tr"`` (one truncated fused sum per step) or ``"gtr"`` (even/odd sub-sums).
    group : int
        Products fused per step (``L``); a power of two.
    frac_bits : int
        ``F``: bits kept after the largest exponent when products are aligned.
    sum_bits : int
        ``F2``: bits kept after the leading bit of the accumulated total.
    rounding : str
        ``"rne"`` or ``"rz"``: the final rounding to the output format.
    ftz_in, ftz_out : bool
        Subnormal inputs read as zero; subnormal results written as zero.
    nan : int
        FP32 NaN pattern of results; 16-bit results use :func:`nan_pattern`.
    overflow_inf : bool
        Products of ``2**128`` or more become infinities (MMA-Sim's ``"tr"`` rule).
    c_drop : bool
        ``C`` is dropped when its exponent is below ``e_big - F - 1`` (MMA-Sim's ``"gtr"`` rule).
    fp8 : str
        ``"ocp"`` (RDNA 4's E4M3 / E5M2) or ``"fnuz"`` (CDNA 3's) encodings of FP8 and BF8.
    """

    name: str
    structure: str = "tr"
    group: int = 16
    frac_bits: int = 24
    sum_bits: int = 31
    rounding: str = "rne"
    ftz_in: bool = False
    ftz_out: bool = False
    nan: int = 0x7FC00000
    overflow_inf: bool = True
    c_drop: bool = False
    fp8: str = "ocp"

    def __post_init__(self):
        if self.structure not in ("tr", "gtr"):
            raise ValueError(f"`structure` must be 'tr' or 'gtr', not {self.structure!r}")
        if self.group < 1 or self.group & (self.group - 1):
            raise ValueError(f"`group` must be a power of two, not {self.group!r}")
        if self.structure == "gtr" and self.group < 2:
            raise ValueError("`group` must be at least 2 for the 'gtr' structure")
        if self.rounding not in ("rne", "rz"):
            raise ValueError(f"`rounding` must be 'rne' or 'rz', not {self.rounding!r}")
        if not 8 <= self.frac_bits <= 30:
            raise ValueError(f"`frac_bits` must be from 8 to 30, not {self.frac_bits!r}")
        if not 23 <= self.sum_bits <= 40 or self.sum_bits + 1 < self.frac_bits:
            raise ValueError(
                f"`sum_bits` must be from 23 to 40 and at least frac_bits - 1, "
                f"not {self.sum_bits!r}"
            )
        if self.fp8 not in ("ocp", "fnuz"):
            raise ValueError(f"`fp8` must be 'ocp' or 'fnuz', not {self.fp8!r}")

    def with_(self, **changes):
        """A copy with some parameters changed (a new ``name`` is advisable)."""
        return replace(self, **changes)

    def element_format(self, name):
        """The decoding format of input elements named ``fp8``/``bf8`` under this algorithm."""
        if name in ("fp8", "bf8") and self.fp8 == "fnuz":
            return FORMATS[name + "_fnuz"]
        return FORMATS[name] if isinstance(name, str) else name


#: What each preset stands for (also the doc string of :mod:`gpurtl.golden.matrix.presets`).
PRESETS_DOC = """Named arithmetic presets: which :class:`Algorithm` each input format uses.

``rdna4`` (the default) stands for RDNA 4 as this project reads it. Every parameter is a
**choice**, because AMD documents none of them:

* one fused step per 16-deep block of stored K (``group = 16``): a 16x16x16 WMMA and the
  16-stored-element SWMMAC each round once per output element, as a dot-product unit as wide as
  the instruction's stored K would;
* the alignment and accumulation widths of the CDNA 3 matrix core that MMA-Sim measured
  (``frac_bits = 24``, ``sum_bits = 31``): the same truncating fused sum, no sticky bit;
* round to nearest even, subnormal inputs and results kept, NaN results as the canonical quiet
  NaN ``0x7FC00000`` (the VALU's; MMA-Sim's CDNA 3 model writes ``0x7FFFFFFF``);
* FP8 / BF8 in the OCP encodings (E4M3 without infinities, E5M2 with them), as LLVM's GFX12
  conversion instructions use; they go through the same one-sum datapath as FP16;
* integers: exact, 32-bit wrap-around, saturation when the instruction's ``clamp`` bit is set.

``cdna3`` reproduces MMA-Sim's CDNA 3 (MI300) ``MFMA`` models (``mmasim/amd/sim.py``): FP16 and
BF16 through ``MMA_TR_FDPA(F=24, F2=31, rho=RNE-FP32, L_max=8)``; FP8 and BF8 (in the FNUZ
encodings of CDNA 3) through ``MMA_GTR_FDPA(F=24, F2=31, RNE-FP32, L_max=16)``.

``rdna3_dot2`` is a sensitivity preset: the RDNA 3 ISA guide says its WMMA instructions work over
several cycles and use the DOT instructions internally, so this preset accumulates in steps of
two products (``V_DOT2_F32_F16``-sized), each fused and rounded, with the CDNA 3 widths.

``rz_narrow`` is a sensitivity preset too: steps of 16, truncation (round toward zero) after a
23-bit sum, the way MMA-Sim describes NVIDIA's tensor cores (``MMA_T_FDPA`` with ``RZ``); it shows
what a cheaper final rounding costs in error.
"""

#: The input classes a preset maps: 16-bit floats, 8-bit floats (FP8 / BF8 and their mixes).
INPUT_CLASSES = ("f16", "bf16", "fp8")


@dataclass(frozen=True)
class Preset:
    """A named set of algorithms: ``algorithms[input_class]`` for ``f16``, ``bf16``, ``fp8``.

    Integer forms are the same under every preset: the exact dot product is added to C once and
    the sum wraps to 32 bits, or saturates when the instruction's ``clamp`` bit is set.
    """

    name: str
    doc: str
    algorithms: dict

    def algorithm(self, a_format):
        """The algorithm for A elements of format ``a_format`` (``fp8``/``bf8`` -> ``fp8``)."""
        key = "fp8" if a_format in ("fp8", "bf8") else a_format
        return self.algorithms[key]


def _same(alg):
    return {
        "f16": alg.with_(name=alg.name + "/f16"),
        "bf16": alg.with_(name=alg.name + "/bf16"),
        "fp8": alg.with_(name=alg.name + "/fp8"),
    }


_RDNA4 = Algorithm("rdna4", structure="tr", group=16, frac_bits=24, sum_bits=31)
_CDNA3_16 = Algorithm(
    "cdna3/16bit", structure="tr", group=8, frac_bits=24, sum_bits=31, nan=0x7FFFFFFF, fp8="fnuz"
)
_CDNA3_8 = Algorithm(
    "cdna3/fp8",
    structure="gtr",
    group=16,
    frac_bits=24,
    sum_bits=31,
    nan=0x7FFFFFFF,
    overflow_inf=False,
    c_drop=True,
    fp8="fnuz",
)

PRESETS = {
    "rdna4": Preset("rdna4", "RDNA 4 as modelled (every parameter a stated choice)", _same(_RDNA4)),
    "cdna3": Preset(
        "cdna3",
        "MMA-Sim's CDNA 3 MFMA algorithms (FP8/BF8 in FNUZ encodings)",
        {
            "f16": _CDNA3_16.with_(name="cdna3/f16"),
            "bf16": _CDNA3_16.with_(name="cdna3/bf16"),
            "fp8": _CDNA3_8,
        },
    ),
    "rdna3_dot2": Preset(
        "rdna3_dot2",
        "steps of 2 fused products (RDNA 3's WMMA over DOT2 instructions; sensitivity)",
        _same(Algorithm("rdna3_dot2", group=2)),
    ),
    "rz_narrow": Preset(
        "rz_narrow",
        "steps of 16, 23-bit sum, round toward zero (NVIDIA-like truncation; sensitivity)",
        _same(Algorithm("rz_narrow", group=16, sum_bits=23, rounding="rz")),
    ),
}

DEFAULT_PRESET = "rdna4"


def preset(name):
    """The preset called ``name``; ValueError naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {name!r}") from None
