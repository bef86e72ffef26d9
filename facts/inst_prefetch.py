"""RDNA 3 and RDNA 4 instruction prefetch: the prefetch instructions, the kernel-entry prefetch,
the sequential prefetch distance and the instruction cache they fill.

Sources (public; each constant below names its own):

* LLVM, ``llvm/lib/Target/AMDGPU/SMInstructions.td``: ``SM_Prefetch_Pseudo`` (operands, flags)
  and ``SMEM_Real_Prefetch_gfx12`` (GFX12 encoding and opcodes).
* LLVM, ``llvm/include/llvm/Support/AMDHSAKernelDescriptor.h``: the ``INST_PREF_SIZE`` field of
  ``COMPUTE_PGM_RSRC3`` (6 bits on GFX11, 8 bits on GFX12); AMDGPUUsage ("Kernel Descriptor",
  ``.amdhsa_inst_pref_size``) gives its unit, 128 bytes.
* LLVM commit ba131b7 ("Do not generate s_set_inst_prefetch_distance for GFX12", PR 78190):
  GFX12 still encodes ``s_set_inst_prefetch_distance`` but it has no effect there.
* Clang's AMDGPU builtin documentation for ``__builtin_amdgcn_s_prefetch_inst`` (LLVM PR 211642):
  the length operand is 0-31, meaning 1-32 chunks of 128 bytes.
* Chips and Cheese, "Examining AMD's RDNA 4 Changes in LLVM" (2024), section "Software Prefetch":
  RDNA 3 prefetches up to 64 x 128-byte lines from a kernel's entry, RDNA 4 up to 256 (8 KB and
  32 KB of code); up to RDNA 3 ``s_set_inst_prefetch_distance`` sets how far (up to three 64-byte
  lines) the front end prefetches ahead of the program counter.
* AMD, "Introducing RDNA Architecture" (white paper, 2019), the work group processor: one
  instruction cache of 32 KB, 4-way set associative, shared by the WGP's two compute units.
"""

from dataclasses import dataclass

__all__ = [
    "PREFETCH_INSTRUCTIONS",
    "PrefetchInstruction",
    "ENTRY_PREFETCH_LINES",
    "INST_PREF_SIZE_BITS",
    "INST_PREF_SIZE_UNIT",
    "PREFETCH_LENGTH_BITS",
    "SMEM_ENCODING",
    "SET_INST_PREFETCH_DISTANCE",
    "ICACHE_SIZE",
    "ICACHE_WAYS",
    "LINE_BYTES",
    "MAX_DISTANCE",
    "ICacheGeometry",
    "encode_prefetch",
]

#: The instruction cache's line, bytes: the unit of the kernel-entry prefetch (``INST_PREF_SIZE``)
#: and of the ``s_prefetch_inst`` length. A choice for the cache itself: the RDNA white paper
#: describes 64-byte lines for RDNA 1; the model keeps one line size, the prefetch unit.
LINE_BYTES = 128

#: Kernel-entry prefetch: lines of 128 bytes from the entry point, the article's figures (RDNA 3:
#: 64 lines = 8 KB, RDNA 4: 256 lines = 32 KB).
ENTRY_PREFETCH_LINES = {"rdna3": 64, "rdna4": 256}

#: Width of the kernel descriptor's ``COMPUTE_PGM_RSRC3.INST_PREF_SIZE`` (bits 4 and up):
#: ``AMDHSAKernelDescriptor.h``, ``COMPUTE_PGM_RSRC3_GFX11(INST_PREF_SIZE, 4, 6)`` and
#: ``COMPUTE_PGM_RSRC3_GFX12_PLUS(INST_PREF_SIZE, 4, 8)``. The largest values, 63 and 255
#: units, are one line short of the article's round 64 and 256.
INST_PREF_SIZE_BITS = {"rdna3": 6, "rdna4": 8}
#: Bytes per ``INST_PREF_SIZE`` unit (AMDGPUUsage).
INST_PREF_SIZE_UNIT = 128

#: Width of the prefetch instructions' ``sdata`` operand as GFX12 encodes it
#: (``SMEM_Real_Prefetch_gfx12``: "Only 5 bits of sdata are supported", bits 10-6); for
#: ``s_prefetch_inst*`` it is the length, 0-31 for 1-32 lines of 128 bytes (clang's builtin
#: documentation).
PREFETCH_LENGTH_BITS = 5

#: GFX12 SMEM encoding (``SMEM_Real_10Plus_common``/``SMEM_Real_gfx12``): bits 31-26 = 0x3d,
#: opcode in bits 18-13, ``sbase`` (an SGPR pair, index / 2) in bits 5-0, ``sdata`` in 10-6,
#: a 24-bit signed immediate ``offset`` in bits 55-32, ``soffset`` (an SGPR, or ``null``) in
#: bits 63-57.
SMEM_ENCODING = 0x3D


@dataclass(frozen=True)
class PrefetchInstruction:
    """One GFX12 prefetch instruction, as ``SMInstructions.td`` defines it.

    ``operands`` is the assembler operand list; every one of them is a *prefetch*:
    ``mayLoad`` and ``mayStore`` are both set only so that the compiler does not move it across
    loads and stores, it writes no register, and ``LGKM_CNT = 0`` means it is counted by no
    wait counter (there is nothing to wait for: no ``s_wait_kmcnt`` covers it).
    """

    name: str
    opcode: int
    operands: tuple
    target: str  # "instruction" cache or "data" (the scalar data path)
    address: str  # how the address is formed

    @property
    def counter(self):
        """The wait counter the instruction increments: none (``LGKM_CNT = 0``)."""
        return None


#: ``SM_Prefetch_Pseudo``: ``$sbase`` (absent in the ``_pc_rel`` forms), ``$offset``
#: (``smem_offset``, 24-bit signed on GFX12), ``$soffset`` (``SReg_32``), ``$sdata`` (``i8imm``,
#: 5 bits encoded). Opcodes from ``SMEM_Real_Prefetch_gfx12``.
PREFETCH_INSTRUCTIONS = {
    p.name: p
    for p in (
        PrefetchInstruction(
            "s_prefetch_inst",
            0x24,
            ("sbase", "offset", "soffset", "sdata"),
            "instruction",
            "sbase (64-bit SGPR pair) + offset + soffset",
        ),
        PrefetchInstruction(
            "s_prefetch_inst_pc_rel",
            0x25,
            ("offset", "soffset", "sdata"),
            "instruction",
            "program counter + offset + soffset",
        ),
        PrefetchInstruction(
            "s_prefetch_data",
            0x26,
            ("sbase", "offset", "soffset", "sdata"),
            "data",
            "sbase (64-bit SGPR pair) + offset + soffset",
        ),
        PrefetchInstruction(
            "s_buffer_prefetch_data",
            0x27,
            ("sbase", "offset", "soffset", "sdata"),
            "data",
            "buffer resource (128-bit SGPR quad) + offset + soffset",
        ),
        PrefetchInstruction(
            "s_prefetch_data_pc_rel",
            0x28,
            ("offset", "soffset", "sdata"),
            "data",
            "program counter + offset + soffset",
        ),
    )
}

#: ``s_set_inst_prefetch_distance`` (SOPP; assembled as ``s_inst_prefetch`` before GFX11):
#: RDNA 2 and 3 take the distance in ``simm16``; GFX12 encodes it with no effect (LLVM commit
#: ba131b7). ``effect`` per generation.
SET_INST_PREFETCH_DISTANCE = {
    "name": "s_set_inst_prefetch_distance",
    "effect": {"rdna2": True, "rdna3": True, "rdna4": False},
}

#: The largest sequential prefetch distance, in lines: the article's "up to three ... lines".
#: How a value maps to a count of lines is not public; the model takes the value as the number
#: of 128-byte lines ahead (a choice).
MAX_DISTANCE = 3

#: The instruction cache of a work group processor (RDNA white paper): 32 KB, 4-way, shared by
#: its two compute units. No public figure for RDNA 3 or RDNA 4 was found; the model keeps
#: RDNA's (a choice; ``simulate(size=...)`` of the experiment takes another).
ICACHE_SIZE = 32 * 1024
ICACHE_WAYS = 4


def encode_prefetch(name, *, sbase=0, offset=0, soffset=124, length=0):
    """The 64-bit GFX12 word of prefetch instruction ``name``.

    ``sbase`` is the first SGPR of the base pair (even) or quad; ``offset`` the signed 24-bit
    byte offset; ``soffset`` the offset SGPR's encoding (124 is ``null`` on GFX11 and later);
    ``length`` the ``sdata`` field (``s_prefetch_inst*``: lines - 1).
    """
    inst = PREFETCH_INSTRUCTIONS.get(name)
    if inst is None:
        raise ValueError(f"`name` must be one of {', '.join(PREFETCH_INSTRUCTIONS)}, not {name!r}")
    if not -(1 << 23) <= offset < (1 << 23):
        raise ValueError(f"`offset` must be a signed 24-bit value, not {offset!r}")
    if not 0 <= length < (1 << PREFETCH_LENGTH_BITS):
        raise ValueError(f"`length` must be 0 to 31, not {length!r}")
    word = SMEM_ENCODING << 26 | inst.opcode << 13 | length << 6
    if "sbase" in inst.operands:
        word |= (sbase >> 1) & 0x3F
    word |= (offset & 0xFFFFFF) << 32
    word |= (soffset & 0x7F) << 57
    return word


def _power_of_two(name, value):
    if not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(f"`{name}` must be a power of two, not {value!r}")


@dataclass(frozen=True)
class ICacheGeometry:
    """The instruction cache's build (:mod:`gpurtl.golden.icache`, :mod:`gpurtl.hdl.icache`).

    Parameters
    ----------
    size : int
        Bytes; a multiple of ``128 * ways`` giving a power-of-two number of sets.
    ways : int
        Associativity, a power of two.
    mshrs : int
        Lines missing at once (demand misses and prefetches together).
    line_bits : int
        Width of a line index (byte address / 128); the program counter has ``line_bits + 7``
        bits. More than the set index bits.
    entry_lines : int
        The most lines the kernel-entry prefetch fetches (64 for RDNA 3, 256 for RDNA 4).
    """

    size: int = 2048
    ways: int = 4
    mshrs: int = 4
    line_bits: int = 12
    entry_lines: int = ENTRY_PREFETCH_LINES["rdna3"]

    def __post_init__(self):
        _power_of_two("ways", self.ways)
        size = self.size
        if not isinstance(size, int) or size <= 0 or size % (LINE_BYTES * self.ways):
            raise ValueError(f"`size` must be a positive multiple of 128 x ways, not {size!r}")
        if self.sets & (self.sets - 1):
            raise ValueError(f"`size` must make a power-of-two number of sets, not {self.sets}")
        if not isinstance(self.mshrs, int) or not 1 <= self.mshrs <= 64:
            raise ValueError(f"`mshrs` must be an integer from 1 to 64, not {self.mshrs!r}")
        if not isinstance(self.line_bits, int) or not self.set_bits < self.line_bits <= 32:
            raise ValueError(
                f"`line_bits` must be an integer above the {self.set_bits} set index bits "
                f"and at most 32, not {self.line_bits!r}"
            )
        if not isinstance(self.entry_lines, int) or not 1 <= self.entry_lines <= 256:
            raise ValueError(
                f"`entry_lines` must be an integer from 1 to 256, not {self.entry_lines!r}"
            )

    @property
    def sets(self):
        return self.size // (LINE_BYTES * self.ways)

    @property
    def set_bits(self):
        return (self.sets - 1).bit_length()

    @property
    def way_bits(self):
        return (self.ways - 1).bit_length()

    @property
    def pc_bits(self):
        """Width of a byte address (program counter)."""
        return self.line_bits + 7

    @property
    def entry_bits(self):
        """Width of the kernel-entry request's line count (0 to ``entry_lines``)."""
        return self.entry_lines.bit_length()
