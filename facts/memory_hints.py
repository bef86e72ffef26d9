"""GFX12 (RDNA 4) cache policy of memory instructions: the temporal hint (TH) and the scope, and
the lookup results of the RT unit's L0.

GFX12 replaced the GLC/SLC/DLC bits of earlier generations with a 3-bit temporal hint and a 2-bit
scope in the ``cpol`` operand of every vector memory instruction. Sources:

* the encodings: LLVM ``llvm/lib/Target/AMDGPU/SIDefines.h``, ``namespace CPol`` ("Below are
  GFX12+ cache policy bits"; newer LLVM moved the enum to
  ``Utils/AMDGPUCachePolicyBits.h`` with the same values); the TH field is bits 0-2 of ``cpol``,
  the scope bits 3-4 (``SCOPE_SHIFT = 3``);
* the meaning of each value: the comments there ("regular", "non-temporal (CU, SE), regular
  (MALL)", ...), the assembler syntax ``th:TH_LOAD_NT``, ``scope:SCOPE_SE`` of LLVM's
  ``docs/AMDGPU/AMDGPUAsmGFX12.rst``, and AMD's "RDNA4 Instruction Set Architecture Reference
  Guide" (the SCOPE and TH fields of the vector memory instruction formats);
* the scopes' cache levels: LLVM ``docs/AMDGPUUsage.rst``, "Memory Model GFX12" (the L0 is per
  CU, the L1 per shader engine, the L2 per device; ``global_inv scope:SCOPE_SE`` after a
  work-group barrier, ``scope:SCOPE_DEV`` on agent-scope atomics, ``global_wb`` only at
  ``SCOPE_SYS``).

The same 3-bit value means different things for loads, stores and atomics (``TH_LU``, 3, is
"last use" on a load, "write-back" on a store); :func:`th_name` names a value for a kind.

What the hardware *does* with a hint is not published beyond these one-line meanings; the cache
models (``golden/memory``, the L0 RTL) state their policies as choices, with parameters.
"""

from amaranth.lib import enum

__all__ = [
    "ATOMIC_CASCADE",
    "ATOMIC_NT",
    "ATOMIC_RETURN",
    "KINDS",
    "L0Lookup",
    "LOAD_TH",
    "SCOPE_BITS",
    "SCOPE_SHIFT",
    "STORE_TH",
    "Scope",
    "TH",
    "TH_BITS",
    "cpol",
    "near_far",
    "th_name",
]

#: Width of the temporal hint field (``CPol::TH = 0x7``).
TH_BITS = 3
#: Width and position of the scope field (``CPol::SCOPE = 0x3 << 3``).
SCOPE_BITS = 2
SCOPE_SHIFT = 3
#: Access kinds whose TH values LLVM names apart (``TH_TYPE_LOAD``, ``_STORE``, ``_ATOMIC``).
KINDS = ("load", "store", "atomic")


class TH(enum.IntEnum, shape=TH_BITS):
    """Load temporal hints (``CPol::TH_*``). The near levels are the CU's L0 and the SE's L1,
    the far level the MALL (Infinity Cache), as LLVM's comments say."""

    RT = 0  #: regular
    NT = 1  #: non-temporal
    HT = 2  #: high-temporal
    LU = 3  #: last use (loads); on stores the same value is TH_WB (``TH_RT_WB``)
    NT_RT = 4  #: non-temporal (CU, SE), regular (MALL)
    RT_NT = 5  #: regular (CU, SE), non-temporal (MALL)
    NT_HT = 6  #: non-temporal (CU, SE), high-temporal (MALL)
    RESERVED = 7  #: "unused value for load insts"; on stores TH_NT_WB


#: Load TH names by value (``th:TH_LOAD_*`` in the assembler).
LOAD_TH = {0: "RT", 1: "NT", 2: "HT", 3: "LU", 4: "NT_RT", 5: "RT_NT", 6: "NT_HT", 7: "RESERVED"}
#: Store TH names by value (``th:TH_STORE_*``): 3 is write-back, "regular (CU, SE),
#: high-temporal with write-back (MALL)"; 7 "non-temporal (CU, SE), high-temporal with
#: write-back (MALL)"; ``TH_BYPASS`` is 3 too, "only to be used with scope = 3".
STORE_TH = {0: "RT", 1: "NT", 2: "HT", 3: "WB", 4: "NT_RT", 5: "RT_NT", 6: "NT_HT", 7: "NT_WB"}
#: Atomic TH bits (``TH_ATOMIC_*``): each bit is a flag, not a value.
ATOMIC_RETURN = 1  #: returning (the pre-sample value comes back) vs non-returning
ATOMIC_NT = 2  #: non-temporal vs regular
ATOMIC_CASCADE = 4  #: cascading vs regular


class Scope(enum.IntEnum, shape=SCOPE_BITS):
    """Coherence scope (``CPol::SCOPE_*`` >> 3): the widest set of agents that must see the
    access, and so the nearest cache level that may serve or keep it."""

    CU = 0  #: the compute unit: its L0
    SE = 1  #: the shader engine: its L1
    DEV = 2  #: the device: the L2 (and the MALL behind it)
    SYS = 3  #: the system: memory


def th_name(value, kind="load"):
    """The name of TH ``value`` for an access ``kind`` (``"load"``, ``"store"``, ``"atomic"``)."""
    if not isinstance(value, int) or not 0 <= value < 1 << TH_BITS:
        raise ValueError(f"`th` must be an integer 0 to 7, not {value!r}")
    if kind == "load":
        return LOAD_TH[value]
    if kind == "store":
        return STORE_TH[value]
    if kind == "atomic":
        flags = [
            name
            for bit, name in (
                (ATOMIC_RETURN, "RETURN"),
                (ATOMIC_NT, "NT"),
                (ATOMIC_CASCADE, "CASCADE"),
            )
            if value & bit
        ]
        return "|".join(flags) or "RT"
    raise ValueError(f"`kind` must be one of {', '.join(KINDS)}, not {kind!r}")


def near_far(th):
    """``(near, far)`` temporal classes of a load TH: the class (``"RT"``, ``"NT"``, ``"HT"``,
    ``"LU"``) at the CU and SE levels and at the MALL, as LLVM's comments split them. The
    single-class hints (RT, NT, HT, LU) apply to every level."""
    name = LOAD_TH[int(th)]
    if name == "RESERVED":
        raise ValueError("TH 7 is reserved for loads")
    if "_" in name:
        near, far = name.split("_")
        return near, far
    return name, name


def cpol(th=TH.RT, scope=Scope.CU):
    """The ``cpol`` operand bits of a hint and a scope (``TH | scope << 3``)."""
    return int(th) | int(scope) << SCOPE_SHIFT


class L0Lookup(enum.IntEnum, shape=2):
    """What the RT unit's L0 found for an accepted request (its ``event.kind`` output)."""

    HIT = 0  #: the line is present
    PENDING = 1  #: the line's fill is on its way: merged into its miss register
    MISS = 2  #: a miss register was allocated
