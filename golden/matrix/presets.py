"""Named arithmetic presets: which :class:`~gpurtl.golden.matrix.arith.Algorithm` each input
format uses.

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

from dataclasses import dataclass

from .arith import Algorithm

__all__ = ["Preset", "PRESETS", "DEFAULT", "preset", "INPUT_CLASSES"]

#: The input classes a preset maps: 16-bit floats, 8-bit floats (FP8 / BF8 and their mixes).
INPUT_CLASSES = ("f16", "bf16", "fp8")


@dataclass(frozen=True)
class Preset:
    """A named set of algorithms: ``algorithms[input_class]`` for ``f16``, ``bf16``, ``fp8``;
    ``int_group`` products per integer step."""

    name: str
    doc: str
    algorithms: dict
    int_group: int = 16

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
        int_group=4,
    ),
    "rz_narrow": Preset(
        "rz_narrow",
        "steps of 16, 23-bit sum, round toward zero (NVIDIA-like truncation; sensitivity)",
        _same(Algorithm("rz_narrow", group=16, sum_bits=23, rounding="rz")),
    ),
}

DEFAULT = "rdna4"


def preset(name):
    """The preset called ``name``; ValueError naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {name!r}") from None
