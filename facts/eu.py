"""Intel Gen execution unit (EU) issue: the instruction subset, the measurements to reproduce.

Facts shared by the RTL (:mod:`gpurtl.hdl.eu`) and the golden model (:mod:`gpurtl.golden.eu`).

Sources:

* ``ARTICLE``: Joshua Barczak, "You Compiled This, Driver. Trust Me....", article on his blog
  (joshbarczak.com/blog, 2016): a measured study of the Gen7.5 EU of an Intel
  HD Graphics 4400 (Core i3-4010U, Haswell). Each entry of :data:`SEED` names the article's
  section and figure.
* Intel, "Intel Open Source HD Graphics Programmer's Reference Manual (PRM) for the 2013 Intel
  Core Processor Family, formerly Haswell", Volume 7 "3D-Media-GPGPU Engine": the EU overview
  (GRF of 128 registers of 256 bits per thread, 7 threads per EU on Gen7.5, the SIMD-4 FPUs and
  the extended-math function codes) and the instruction format (the ``DepCtrl`` field with its
  ``NoDDChk`` and ``NoDDClr`` bits, the ``ExecSize`` field).
* Mesa ``src/intel/compiler/brw_eu_defines.h`` (``BRW_MATH_FUNCTION_*``: the math function
  codes used here) and the Gen4-Gen11 vec4 back end's ``opt_set_dependency_control``
  (``elk_vec4.cpp``, formerly ``brw_vec4.cpp``): NoDDClr on the first and NoDDChk on the second
  of two writes that fill disjoint channels of one register.
* Thread counts of newer generations: Intel, "The Compute Architecture of Intel Processor
  Graphics Gen9" and "... Gen11" white papers (7 threads per EU); Chips and Cheese's article on
  Xe3 from Intel's open-source compiler changes (March 2025): "Xe3 XVEs can run 10 threads
  concurrently, up from eight in prior generations" (Xe-HPG, Xe2; Xe2's large-GRF mode runs 4).

The instruction word of the block is this project's compact encoding of that subset (the
native Gen encoding is 128 bits with register regions; the fields the issue logic needs are
kept, :data:`INST_FIELDS`), not Gen's binary format.
"""

from dataclasses import dataclass

from amaranth.lib import data, enum

__all__ = [
    "ARTICLE",
    "SEED",
    "Seed",
    "Op",
    "ExecSize",
    "Type",
    "MathFn",
    "inst_layout",
    "INST_FIELDS",
    "EXEC_LANES",
    "TYPE_BYTES",
    "GRF_BYTES",
    "GRF_PER_THREAD",
    "REGS",
    "THREADS",
    "OPERAND_BUFFER",
    "num_sources",
    "dual_capable",
    "math_rate",
]

ARTICLE = 'Joshua Barczak, "You Compiled This, Driver. Trust Me....", joshbarczak.com/blog (2016)'


@dataclass(frozen=True)
class Seed:
    """One measurement (or documented fact) of :data:`ARTICLE`, with where it is."""

    name: str
    value: object
    where: str
    text: str


#: The article's figures that the ``eu-issue`` experiment reproduces, with their places.
SEED = {
    s.name: s
    for s in (
        Seed(
            "simd8_passes",
            2,
            "Instruction Issue, first paragraph (quoting Intel's documents)",
            "the execution units are 4-wide and SIMD8 executes over 2 clocks",
        ),
        Seed(
            "simd4_same_as_simd8",
            True,
            "Instruction Issue, first paragraph",
            "SIMD4 execution has the same latency as SIMD8",
        ),
        Seed(
            "simd16_rate",
            0.5,
            "Instruction Issue, figure issue_rate_adds",
            "SIMD16 is about half the issue rate of SIMD8",
        ),
        Seed(
            "dual_issue_gain",
            1.5,
            "Instruction Issue, figure issue_rate_adds",
            "only 50% [more] instead of the almost 2x we ought to be able to achieve",
        ),
        Seed(
            "read_bytes_per_clock",
            96,
            "Instruction Issue, after figure issue_rate_adds (citing Intel's architecture white "
            "paper)",
            "the EU is only able to read 96 bytes/clock from GPRs; 1.5 cycles to read a pair",
        ),
        Seed(
            "same_register_penalty_dual",
            2.0,
            "Instruction Issue, figure issue_rate_adds",
            "with dual issue, back-to-back writes to one register cost about 2x (SIMD4/8)",
        ),
        Seed(
            "same_register_penalty_single",
            1.0,
            "Instruction Issue, figure issue_rate_adds",
            "for single issue there is no penalty: the hardware switches threads",
        ),
        Seed(
            "dual_issue_types",
            "float",
            "Instruction Issue, first paragraph and figure issue_rate_movs",
            "only a few floating-point instructions dual-issue; float-typed MOVs are the fast ones",
        ),
        Seed(
            "noddchk_single_issue",
            True,
            "Instruction Issue, figure issue_rate_noddchk",
            "disabling the dependency check has the side effect of forcing single issue",
        ),
        Seed(
            "math_full_rate",
            ("sqrt", "exp", "log", "rsqrt"),
            "Instruction Issue, figure extended_math",
            "sqrt, exp, log, rsqrt are all full rate",
        ),
        Seed(
            "math_half_rate",
            ("pow", "sin", "cos", "fdiv"),
            "Instruction Issue, figure extended_math",
            "pow, trig and fdiv are half rate",
        ),
        Seed(
            "idiv_rate",
            1 / 16,
            "Instruction Issue, figure extended_math",
            "integer divide is 1/16 rate; no SIMD16; SIMD4 differs from SIMD8 only here",
        ),
        Seed(
            "hide_hit_instructions",
            6,
            "Block Reads, figure block_loads",
            "at full occupancy about 6 instructions hide a cache hit",
        ),
        Seed(
            "hide_miss_instructions",
            11,
            "Block Reads, figure block_loads",
            'about 11 hide a "Graphics L3" miss (read with invalidate-after-read)',
        ),
        Seed(
            "threads_per_eu",
            7,
            "Timing EU Threads (thread slot = SubSlice*10 + EUID + (thread+0.5)/7)",
            "7 hardware threads per EU on Gen7.5",
        ),
        Seed(
            "threads_per_group",
            (64, 70),
            "Testing Thread Dispatch Methods; Long Threads",
            "a thread group is capped at 64 hardware threads of the sub-slice's 70 slots",
        ),
        Seed(
            "grf_bytes_per_thread",
            4096,
            "Why Did I Go To All This Trouble?",
            "every thread has 4 KB of register space: occupancy does not depend on registers",
        ),
    )
}

#: Bytes of one general register (GRF) and registers per thread (PRM Vol 7: 128 x 256 bits).
GRF_BYTES = 32
GRF_PER_THREAD = 128
assert GRF_BYTES * GRF_PER_THREAD == SEED["grf_bytes_per_thread"].value

#: Registers the block's scoreboard tracks per thread: register fields are 4 bits (a choice:
#: the issue behaviour depends on which registers collide, not on how many exist).
REGS = 16

#: Hardware threads per EU (or XVE) of each generation (module doc string for the sources).
THREADS = {"gen7.5": 7, "gen9": 7, "gen11": 7, "xe-lp": 7, "xe-hpg": 8, "xe2": 8, "xe3": 10}

#: Operand bytes the register-file read port may hold over from earlier clocks: the largest
#: single read of the subset (a SIMD16 three-source instruction, 3 x 2 registers). A choice: the
#: article says the second instruction of a pair finishes its reads in the next clock.
OPERAND_BUFFER = 6 * GRF_BYTES


class Op(enum.Enum, shape=3):
    """Instructions of the subset."""

    MOV = 0  #: one source
    ADD = 1  #: two sources
    MUL = 2  #: two sources
    MAD = 3  #: three sources
    MATH = 4  #: extended math, ``fn`` selects the function (one or two sources)
    SEND = 5  #: data-port read: block (``lines`` = 1) or scattered (``lines`` cachelines)
    NOP = 6  #: no operands, no destination
    NOP7 = 7  #: reserved code; decodes as NOP


class ExecSize(enum.Enum, shape=2):
    """SIMD width (the ``ExecSize`` field)."""

    SIMD1 = 0
    SIMD4 = 1
    SIMD8 = 2
    SIMD16 = 3


EXEC_LANES = {ExecSize.SIMD1: 1, ExecSize.SIMD4: 4, ExecSize.SIMD8: 8, ExecSize.SIMD16: 16}


class Type(enum.Enum, shape=2):
    """Operand data type (one type for destination and sources: no conversions)."""

    F = 0  #: 32-bit float
    D = 1  #: 32-bit signed integer
    UD = 2  #: 32-bit unsigned integer
    W = 3  #: 16-bit signed integer


TYPE_BYTES = {Type.F: 4, Type.D: 4, Type.UD: 4, Type.W: 2}


class MathFn(enum.Enum, shape=4):
    """Extended-math function codes (Mesa ``BRW_MATH_FUNCTION_*``); unnamed codes are reserved
    and run at full rate."""

    INV = 1
    LOG = 2
    EXP = 3
    SQRT = 4
    RSQ = 5
    SIN = 6
    COS = 7
    FDIV = 9
    POW = 10
    IDIV_QR = 11
    IDIV_Q = 12
    IDIV_R = 13


#: Fields of one instruction word, in order (low bits first).
INST_FIELDS = {
    "op": Op,
    "size": ExecSize,
    "type": Type,
    "fn": 4,  #: MathFn code (MATH)
    "dst": 4,
    "src0": 4,
    "src1": 4,
    "src2": 4,
    "noddchk": 1,  #: DepCtrl: skip the destination (write-after-write) check
    "noddclr": 1,  #: DepCtrl: leave the destination marked until a later write clears it
    "lines": 4,  #: SEND: cachelines touched minus one (0: a block read of one line)
    "miss": 1,  #: SEND: the read misses (the article's invalidate-after-read reads)
    "rlen": 2,  #: SEND: response registers minus one
    "eot": 1,  #: last instruction of the program
}


def inst_layout():
    """The instruction word as a :class:`data.StructLayout`."""
    return data.StructLayout(INST_FIELDS)


def num_sources(op, fn=0):
    """Register sources read by ``op`` (``fn``: the math function)."""
    op = Op(op)
    if op in (Op.ADD, Op.MUL):
        return 2
    if op is Op.MAD:
        return 3
    if op is Op.MATH:
        return 2 if fn in (MathFn.FDIV.value, MathFn.POW.value, 11, 12, 13) else 1
    if op in (Op.MOV, Op.SEND):
        return 1
    return 0


def dual_capable(op, type_):
    """Whether an instruction may issue beside another thread's: float MOV/ADD/MUL/MAD (the
    article: only some floating-point instructions dual-issue, integer ones do not)."""
    return Op(op) in (Op.MOV, Op.ADD, Op.MUL, Op.MAD) and Type(type_) is Type.F


def math_rate(fn):
    """Clocks of the math unit per SIMD8 pass of function ``fn``, relative to a full-rate
    function (1): the article's extended_math figure. Integer divide is 1/16 rate."""
    if fn in (MathFn.POW.value, MathFn.SIN.value, MathFn.COS.value, MathFn.FDIV.value):
        return 2
    if fn in (11, 12, 13):
        return 16
    return 1
