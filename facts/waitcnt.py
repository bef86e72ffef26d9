"""Wait-counter generation profiles: counter sets, widths, instruction classes and wait encodings.

These are facts, shared by the RTL (:mod:`gpurtl.hdl.waitcnt`) and the golden model
(:mod:`gpurtl.golden.waitcnt`). Sources, all in LLVM ``llvm/lib/Target/AMDGPU/``:

* counter sets and widths: ``Utils/AMDGPUBaseInfo.cpp`` (``get*cntBitWidth``) and
  ``SIInsertWaitcnts.cpp`` (``InstCounterType``); AMD "RDNA4 Instruction Set Architecture" guide,
  Table 4 (counters);
* instruction class to counter map: ``SIInsertWaitcnts.cpp`` ``WaitEventMaskForInstGFX12Plus`` and
  ``WaitEventMaskForInstPreGFX12``;
* wait encodings: ``SOPInstructions.td`` (SOPP/SOPK formats and opcodes) and the
  ``Utils/AMDGPUBaseInfo.cpp`` encoders (``encodeWaitcnt``, ``encodeLoadcntDscnt``, ...).
"""

from dataclasses import dataclass

from amaranth.lib import enum

__all__ = [
    "FULL_POLICIES",
    "QUEUE_ORDERS",
    "MemoryConfig",
    "MEMORY_DEFAULTS",
    "InstClass",
    "WaitField",
    "WaitForm",
    "Profile",
    "PROFILES",
    "profile",
    "SOPP_PREFIX",
    "SOPK_PREFIX",
]


class InstClass(enum.Enum, shape=4):
    """Instruction classes that bump wait counters (``SIInsertWaitcnts.cpp`` event map)."""

    VMEM_LOAD = 0  #: buffer/global/scratch load, atomic with return, image_load, global_inv
    VMEM_STORE = 1  #: buffer/global/scratch store, atomic without return, image store, global_wb
    IMAGE_SAMPLE = 2  #: image_sample*, gather4, get_lod, msaa_load (VSAMPLE encoding)
    BVH = 3  #: image_bvh*_intersect_ray
    FLAT_LOAD = 4  #: FLAT (generic address) load / atomic with return: bumps two counters
    FLAT_STORE = 5  #: FLAT store / atomic without return: bumps two counters
    LDS = 6  #: DS_* LDS operations
    SMEM = 7  #: s_load_*, s_buffer_load_*, s_memtime
    MESSAGE = 8  #: s_sendmsg*, s_sendmsg_rtn, barrier-state queries
    EXPORT = 9  #: exports (pos/param/mrt)
    LDS_PARAM = 10  #: ds_param_load / ds_direct_load (LDSDIR)


#: What an issue into a counter at its maximum does: ``"stall"`` refuses it, ``"saturate"``
#: accepts it, leaves the counter at its maximum and flags an overflow.
FULL_POLICIES = ("stall", "saturate")

#: Return orders of the memory model behind the counters: ``"inorder"`` (RDNA 3: one in-order
#: queue per counter type, shared by all waves), ``"ooo"`` (RDNA 4: waves and counter types
#: complete independently).
QUEUE_ORDERS = ("inorder", "ooo")


@dataclass(frozen=True)
class MemoryConfig:
    """The build parameters of the wait counters and of the memory latency model behind them,
    with their defaults (the RTL, the golden models and the registry take them from here). The
    latencies are choices of a model, not measurements: 20 cycles for a hit, 200 for a miss."""

    generation: str = "gfx12"
    waves: int = 16
    full_policy: str = "stall"
    queue: str = "ooo"
    queue_depth: int = 16
    hit_latency: int = 20
    miss_latency: int = 200


#: The defaults of :class:`MemoryConfig`.
MEMORY_DEFAULTS = MemoryConfig()

#: SOPP words have bits [31:23] = 0x17F; SOPK words have bits [31:28] = 0xB
#: (``SOPInstructions.td``).
SOPP_PREFIX = 0x17F
SOPK_PREFIX = 0xB


@dataclass(frozen=True)
class WaitField:
    """One counter threshold inside a wait instruction's 16-bit immediate.

    The value is ``((simm16 >> lo_shift) & lo_mask) | (((simm16 >> hi_shift) & hi_mask) << lo_bits)``
    and applies to every counter in ``counters``.
    """

    counters: tuple
    lo_shift: int
    lo_bits: int
    hi_shift: int = 0
    hi_bits: int = 0

    def extract(self, simm16):
        low = (simm16 >> self.lo_shift) & ((1 << self.lo_bits) - 1)
        high = (simm16 >> self.hi_shift) & ((1 << self.hi_bits) - 1) if self.hi_bits else 0
        return low | (high << self.lo_bits)


@dataclass(frozen=True)
class WaitForm:
    """A wait instruction: its format (``"sopp"`` or ``"sopk"``), opcode and immediate fields."""

    name: str
    fmt: str
    opcode: int
    fields: tuple

    def matches(self, word):
        if self.fmt == "sopp":
            return (word >> 23) == SOPP_PREFIX and ((word >> 16) & 0x7F) == self.opcode
        return (word >> 28) == SOPK_PREFIX and ((word >> 23) & 0x1F) == self.opcode

    def encode(self, **counts):
        """Instruction word waiting for the given counts (omitted fields: all ones = no wait)."""
        simm16 = 0
        for field in self.fields:
            value = counts.get(field.counters[0], (1 << (field.lo_bits + field.hi_bits)) - 1)
            low, high = value & ((1 << field.lo_bits) - 1), value >> field.lo_bits
            simm16 |= low << field.lo_shift
            if field.hi_bits:
                simm16 |= (high & ((1 << field.hi_bits) - 1)) << field.hi_shift
        if self.fmt == "sopp":
            return (SOPP_PREFIX << 23) | (self.opcode << 16) | simm16
        # s_waitcnt_*cnt sdst, simm16 with sdst = null; only simm16 is modelled.
        return (SOPK_PREFIX << 28) | (self.opcode << 23) | (0x7C << 16) | simm16


@dataclass(frozen=True)
class Profile:
    """One GPU generation: counter names and widths, the class map and the wait forms."""

    name: str
    counters: tuple  # counter names, in port order
    widths: tuple  # bits per counter
    class_map: dict  # InstClass -> tuple of counter names
    waits: tuple  # WaitForm, ...

    def index(self, counter):
        return self.counters.index(counter)

    def max(self, counter):
        return (1 << self.widths[self.index(counter)]) - 1

    def wait(self, name):
        for form in self.waits:
            if form.name == name:
                return form
        raise KeyError(name)


def _single(name, opcode, counter, fmt="sopp"):
    return WaitForm(name, fmt, opcode, (WaitField((counter,), 0, 16),))


# GFX12 (RDNA 4): seven split counters. Widths: LLVM getLoadcntBitWidth & co.
_GFX12 = Profile(
    name="gfx12",
    counters=("load", "store", "sample", "bvh", "exp", "ds", "km"),
    widths=(6, 6, 6, 3, 3, 6, 5),
    class_map={
        InstClass.VMEM_LOAD: ("load",),
        InstClass.VMEM_STORE: ("store",),
        InstClass.IMAGE_SAMPLE: ("sample",),
        InstClass.BVH: ("bvh",),
        InstClass.FLAT_LOAD: ("load", "ds"),
        InstClass.FLAT_STORE: ("store", "ds"),
        InstClass.LDS: ("ds",),
        InstClass.SMEM: ("km",),
        InstClass.MESSAGE: ("km",),
        InstClass.EXPORT: ("exp",),
        InstClass.LDS_PARAM: ("exp",),
    },
    waits=(
        _single("s_wait_loadcnt", 0x40, "load"),
        _single("s_wait_storecnt", 0x41, "store"),
        _single("s_wait_samplecnt", 0x42, "sample"),
        _single("s_wait_bvhcnt", 0x43, "bvh"),
        _single("s_wait_expcnt", 0x44, "exp"),
        _single("s_wait_dscnt", 0x46, "ds"),
        _single("s_wait_kmcnt", 0x47, "km"),
        # Combined forms: load/store count in [13:8], ds count in [5:0] (LLVM encodeLoadcntDscnt).
        WaitForm(
            "s_wait_loadcnt_dscnt",
            "sopp",
            0x48,
            (WaitField(("load",), 8, 6), WaitField(("ds",), 0, 6)),
        ),
        WaitForm(
            "s_wait_storecnt_dscnt",
            "sopp",
            0x49,
            (WaitField(("store",), 8, 6), WaitField(("ds",), 0, 6)),
        ),
        # Deprecated gfx11-layout s_waitcnt (op 0x09) still decodes on gfx12; its mapping onto the
        # split counters is not documented: we apply vm to load/sample/bvh, lgkm to
        # ds/km and exp to exp.
        WaitForm(
            "s_waitcnt",
            "sopp",
            0x09,
            (
                WaitField(("exp",), 0, 3),
                WaitField(("ds", "km"), 4, 6),
                WaitField(("load", "sample", "bvh"), 10, 6),
            ),
        ),
    ),
)

_GFX11_CLASSES = {
    InstClass.VMEM_LOAD: ("vm",),
    InstClass.VMEM_STORE: ("vs",),
    InstClass.IMAGE_SAMPLE: ("vm",),
    InstClass.BVH: ("vm",),
    InstClass.FLAT_LOAD: ("vm", "lgkm"),
    InstClass.FLAT_STORE: ("vs", "lgkm"),
    InstClass.LDS: ("lgkm",),
    InstClass.SMEM: ("lgkm",),
    InstClass.MESSAGE: ("lgkm",),
    InstClass.EXPORT: ("exp",),
    InstClass.LDS_PARAM: ("exp",),
}

# GFX11 (RDNA 3): s_waitcnt simm16 = exp [2:0], lgkm [9:4], vm [15:10]; s_waitcnt_vscnt is SOPK
# 0x18 and the SOPK vm/exp/lgkm forms are 0x19/0x1A/0x1B (``SOPInstructions.td``).
_GFX11 = Profile(
    name="gfx11",
    counters=("vm", "lgkm", "vs", "exp"),
    widths=(6, 6, 6, 3),
    class_map=_GFX11_CLASSES,
    waits=(
        WaitForm(
            "s_waitcnt",
            "sopp",
            0x09,
            (WaitField(("exp",), 0, 3), WaitField(("lgkm",), 4, 6), WaitField(("vm",), 10, 6)),
        ),
        _single("s_waitcnt_vscnt", 0x18, "vs", "sopk"),
        _single("s_waitcnt_vmcnt", 0x19, "vm", "sopk"),
        _single("s_waitcnt_expcnt", 0x1A, "exp", "sopk"),
        _single("s_waitcnt_lgkmcnt", 0x1B, "lgkm", "sopk"),
    ),
)

# GFX10 (RDNA 1/2): s_waitcnt is SOPP op 0x0C with vm = [3:0] + [15:14], exp [6:4], lgkm [13:8];
# SOPK forms vscnt 0x17, vmcnt 0x18, expcnt 0x19, lgkmcnt 0x1A (``SOPInstructions.td``).
_GFX10 = Profile(
    name="gfx10",
    counters=("vm", "lgkm", "vs", "exp"),
    widths=(6, 6, 6, 3),
    class_map=_GFX11_CLASSES,
    waits=(
        WaitForm(
            "s_waitcnt",
            "sopp",
            0x0C,
            (
                WaitField(("exp",), 4, 3),
                WaitField(("lgkm",), 8, 6),
                WaitField(("vm",), 0, 4, 14, 2),
            ),
        ),
        _single("s_waitcnt_vscnt", 0x17, "vs", "sopk"),
        _single("s_waitcnt_vmcnt", 0x18, "vm", "sopk"),
        _single("s_waitcnt_expcnt", 0x19, "exp", "sopk"),
        _single("s_waitcnt_lgkmcnt", 0x1A, "lgkm", "sopk"),
    ),
)

# GFX9 (Vega): no store counter (stores count on vm); lgkm is 4 bits in [11:8] (``AMDGPUBaseInfo.cpp``).
_GFX9 = Profile(
    name="gfx9",
    counters=("vm", "lgkm", "exp"),
    widths=(6, 4, 3),
    class_map={
        **{
            cls: tuple("vm" if c == "vs" else c for c in counters)
            for cls, counters in _GFX11_CLASSES.items()
        }
    },
    waits=(
        WaitForm(
            "s_waitcnt",
            "sopp",
            0x0C,
            (
                WaitField(("exp",), 4, 3),
                WaitField(("lgkm",), 8, 4),
                WaitField(("vm",), 0, 4, 14, 2),
            ),
        ),
    ),
)

PROFILES = {p.name: p for p in (_GFX12, _GFX11, _GFX10, _GFX9)}


def profile(name):
    """The :class:`Profile` called ``name`` (``gfx12``, ``gfx11``, ``gfx10``, ``gfx9``)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"`generation` must be one of {', '.join(PROFILES)}, not {name!r}"
        ) from None
