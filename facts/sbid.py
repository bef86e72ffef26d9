"""Intel's software scoreboard (Gen12+ SWSB): tokens (SBIDs), their semantics and counts.

These are facts, shared by the RTL (:mod:`gpurtl.hdl.sbid`) and the golden model
(:mod:`gpurtl.golden.sbid`).

Semantics (Mesa ``src/intel/compiler/brw_fs_scoreboard.cpp``, later ``brw_lower_scoreboard.cpp``;
the encoding in ``brw_eu_defines.h`` ``struct tgl_swsb`` and ``tgl_swsb_encode``; IGC
``visa/LocalScheduler/SWSB_G4IR.cpp``):

* Gen12 and later have no hardware register scoreboard; the compiler annotates every instruction
  with a software scoreboard field (SWSB).
* An *out-of-order* instruction (``send``, and on some parts extended math) is given a token, its
  SBID, with mode ``SET`` (written ``$N`` in the assembly). The token is in use until the
  instruction completes.
* A dependent instruction's SWSB names the token with mode ``DST`` (``$N.dst``: wait until the
  instruction that set it has written its destination) or ``SRC`` (``$N.src``: wait until it has
  read its sources, for a write-after-read hazard). ``sync.allwr`` / ``sync.allrd`` wait for every
  token at once (``enum tgl_sync_function``).
* *In-order* ALU pipes use a distance instead (``RegDist``, 3 bits, written ``@N``: wait for the
  N-th previous in-order instruction of the pipe), with no token.
* Mesa assigns SBIDs round-robin, ``(next_id++) & (num_sbids - 1)``
  (``allocate_inst_dependencies``); the number of tokens therefore bounds a thread's
  out-of-order instructions in flight.

Token counts (SBIDs per thread):

* IGC ``visa/G4_Kernel.cpp`` ``GRFMode`` tables, tuples (GRFs, threads per EU, SWSB tokens,
  accumulators): Gen12LP/TGL (128, 7, 16); XeHPG/MTL (128, 8, 16) and (256, 4, 16); PVC and Xe2
  (128, 8, 16) and (256, 4, 32); Xe3 32 tokens in every mode from (32, 10) to (256, 4).
* Mesa ``brw_lower_scoreboard.cpp``: ``num_sbids = ver >= 30 ? 32 : 16`` with the note "Use 32
  SBIDs on Xe2 while in large GRF mode" as not yet done (Mesa never uses large GRF).
* Chips and Cheese, "Looking Ahead at Intel's Xe3 GPU Architecture" (2025): "Each Xe3 thread gets
  32 scoreboard tokens regardless of occupancy, so a XVE has 320 scoreboard tokens in total. On
  Xe2, a thread gets 16 tokens if the XVE is running eight threads, or 32 in 'large GRF' mode
  with four threads. Thus Xe2's XVEs only have 128 scoreboard tokens in total."
"""

from dataclasses import dataclass

__all__ = ["SbidMode", "Config", "CONFIGS", "config", "SWSB_REGDIST_BITS"]

#: Width of the RegDist field of an SWSB annotation (``tgl_swsb.regdist : 3``).
SWSB_REGDIST_BITS = 3


class SbidMode:
    """``enum tgl_sbid_mode`` of Mesa ``brw_eu_defines.h``: what an SWSB does with its token."""

    NULL = 0  #: no token
    SRC = 1  #: ``$N.src``: wait until the token's instruction has read its sources
    DST = 2  #: ``$N.dst``: wait until it has written its destination
    SET = 4  #: ``$N``: this instruction takes the token


@dataclass(frozen=True)
class Config:
    """One GPU generation and register mode: threads per EU/XVE and tokens per thread."""

    name: str
    label: str
    threads: int  # hardware threads per EU / XVE in this mode
    tokens: int  # SBIDs per thread
    grfs: int  # GRF registers per thread in this mode
    source: str

    @property
    def tokens_per_eu(self):
        return self.threads * self.tokens


_IGC = "IGC visa/G4_Kernel.cpp GRFMode"
_CNC = "Chips and Cheese, Looking Ahead at Intel's Xe3 GPU Architecture (2025)"

CONFIGS = {
    c.name: c
    for c in (
        Config("gen12", "Gen12LP (TGL)", 7, 16, 128, _IGC),
        Config("xe2", "Xe2 (128 GRF)", 8, 16, 128, f"{_IGC}; {_CNC}"),
        Config("xe2_large_grf", "Xe2 large GRF (256)", 4, 32, 256, f"{_IGC}; {_CNC}"),
        Config("xe3", "Xe3 (128 GRF)", 8, 32, 128, f"{_IGC}; {_CNC}"),
        Config("xe3_96", "Xe3 (96 GRF or fewer)", 10, 32, 96, f"{_IGC}; {_CNC}"),
        Config("xe3_160", "Xe3 (160 GRF)", 6, 32, 160, _IGC),
        Config("xe3_192", "Xe3 (192 GRF)", 5, 32, 192, _IGC),
        Config("xe3_large_grf", "Xe3 (256 GRF)", 4, 32, 256, _IGC),
    )
}


def config(name):
    """The :class:`Config` called ``name`` (see :data:`CONFIGS`)."""
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"`config` must be one of {', '.join(CONFIGS)}, not {name!r}") from None
