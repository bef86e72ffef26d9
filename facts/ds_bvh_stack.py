"""The LDS BVH traversal stack instructions ``ds_bvh_stack_*``: opcodes, special node pointers,
the packed stack-address register and the request/response layouts of the stack block.

Sources
-------
* AMD "RDNA4 Instruction Set Architecture" reference guide, section 16.15 (VDS opcodes 224-226:
  ``DS_BVH_STACK_PUSH4_POP1_RTN_B32``, ``DS_BVH_STACK_PUSH8_POP1_RTN_B32``,
  ``DS_BVH_STACK_PUSH8_POP2_RTN_B64``; OFFSET0[4:0] is the stack size, OFFSET1[0] the
  "triangle size optimization" and OFFSET1[1] the "primitive range enable").
* GPUOpen gpurt ``src/shaders/rtip3_ds_stack_emulation.hlsl`` (``unpack_stack_addr``,
  ``pack_stack_addr``: the register fields below).
* GPUOpen gpurt ``src/shadersClean/common/ShaderDefs.hlsli`` and ``Common.hlsli`` (the special
  node pointers and node types); Mesa RADV ``src/amd/vulkan/bvh/bvh.h`` (the same values).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

__all__ = [
    "StackOp",
    "INVALID_NODE",
    "TERMINAL_NODE",
    "SKIP_0_3",
    "SKIP_4_7",
    "SKIP_0_7",
    "END_SEARCH",
    "PRIM_RANGE_UPDATE",
    "SPECIAL_NODE_PREFIX",
    "NODE_TYPE_TRIANGLE_0",
    "NODE_TYPE_TRIANGLE_1",
    "NODE_TYPE_TRIANGLE_2",
    "NODE_TYPE_TRIANGLE_3",
    "NODE_TYPE_BOX",
    "NODE_TYPE_INSTANCE",
    "node_type",
    "NAV_END_OF_PAIR",
    "NAV_END_OF_NODE",
    "NAV_END_OF_RANGE",
    "STACK_STRIDE_DWORDS",
    "STACK_SIZE_MAX",
    "BASE_BITS",
    "STACK_ADDR_LAYOUT",
    "stack_request_layout",
    "STACK_REQUEST_LAYOUT",
    "STACK_RESPONSE_LAYOUT",
]


class StackOp(enum.IntEnum, shape=8):
    """VDS opcode of the stack instruction (RDNA4 ISA section 16.15)."""

    #: ``DS_BVH_STACK_PUSH4_POP1_RTN_B32`` (the RDNA 3 ``DS_BVH_STACK_RTN_B32``): DATA1 is 4 DWORDs.
    PUSH4_POP1 = 224
    #: ``DS_BVH_STACK_PUSH8_POP1_RTN_B32``: walks an 8-wide BVH.
    PUSH8_POP1 = 225
    #: ``DS_BVH_STACK_PUSH8_POP2_RTN_B64``: returns two pointers (feeds both intersection engines).
    PUSH8_POP2 = 226


# Special 32-bit node pointers: every value with bits [31:3] all set (gpurt Common.hlsli).
INVALID_NODE = 0xFFFFFFFF  #: no node (a miss); also "stack empty after an overflow"
TERMINAL_NODE = 0xFFFFFFFE  #: stack empty and nothing was lost: traversal is done
SKIP_0_3 = 0xFFFFFFFD  #: bit 1 clear: do not push slots 0-3
SKIP_4_7 = 0xFFFFFFFB  #: bit 2 clear: do not push slots 4-7
SKIP_0_7 = 0xFFFFFFF9  #: bits 1 and 2 clear: do not push any further slot
END_SEARCH = 0xFFFFFFF8  #: gpurt's name of the last-node value with bits [2:0] clear
PRIM_RANGE_UPDATE = 0xFFFFFFF8  #: last-node value of a primitive-range update; bits [1:0] = nav
SPECIAL_NODE_PREFIX = 0x1FFFFFFF  #: ``ptr >> 3`` of every special value

# Node types (the low 3 bits of a pointer as the stack instructions classify them; gpurt
# ShaderDefs.hlsli). In RT IP 3.1 types 0-3 and 8-11 are the triangle pairs 0-7 of a primitive
# node; ``(ptr & 7) <= 3`` recognises all of them.
NODE_TYPE_TRIANGLE_0 = 0
NODE_TYPE_TRIANGLE_1 = 1
NODE_TYPE_TRIANGLE_2 = 2
NODE_TYPE_TRIANGLE_3 = 3
NODE_TYPE_BOX = 5  #: BVH8 box (RT IP 3.1)
NODE_TYPE_INSTANCE = 6  #: instance node: the TLAS-to-BLAS transition


def node_type(ptr):
    """The 3-bit node type the stack instructions test (gpurt ``GetNodeType``)."""
    return ptr & 7


# Navigation state of a primitive-range update, carried in last_node_ptr[1:0] (gpurt TraceRay3_1).
NAV_END_OF_PAIR = 0  #: continue with the next pair of the same node
NAV_END_OF_NODE = 1  #: continue with pair 0 of the next 128-byte node
NAV_END_OF_RANGE = 2  #: the range is done: push nothing

STACK_STRIDE_DWORDS = 32  #: DWORDs between a lane's consecutive entries (wave32 interleave)
STACK_SIZE_MAX = 31  #: OFFSET0[4:0]
BASE_BITS = 14  #: width of the base field (a DWORD index into the LDS)

# The packed stack-address register, least significant field first (gpurt pack_stack_addr).
STACK_ADDR_LAYOUT = data.StructLayout(
    {
        "valid_entries": unsigned(5),  # [4:0]   entries on the stack
        "entries_to_tlas": unsigned(5),  # [9:5]   entries pushed since the last instance pop
        "addr": unsigned(5),  # [14:10] ring index of the next push
        "base": unsigned(BASE_BITS),  # [28:15] DWORD index of the lane's entry 0
        "has_tlas": unsigned(1),  # [29]    the stack holds entries of the parent (TLAS) BVH
        "has_overflowed": unsigned(1),  # [30]    entries were lost: walk back when empty
        "blas2tlas_pop": unsigned(1),  # [31]    this pop returned from a BLAS to the TLAS
    }
)


def stack_request_layout():
    """Layout of one lane's instruction as the stack block takes it.

    ``op`` is the opcode, ``stack_addr`` the ADDR VGPR, ``last_node_ptr`` DATA0, ``data`` DATA1
    (the intersection result DW0..7; the push4 form reads DW0..3), ``tri_size_opt`` and
    ``prim_range`` OFFSET1[0] and OFFSET1[1]. The stack size (OFFSET0) is a build parameter.
    """
    return data.StructLayout(
        {
            "op": StackOp,
            "stack_addr": STACK_ADDR_LAYOUT,
            "last_node_ptr": unsigned(32),
            "data": data.ArrayLayout(unsigned(32), 8),
            "tri_size_opt": unsigned(1),
            "prim_range": unsigned(1),
        }
    )


STACK_REQUEST_LAYOUT = stack_request_layout()

#: ``stack_addr``: the updated ADDR VGPR; ``dst0``/``dst1``: the returned pointers (``dst1`` is
#: INVALID_NODE for the pop1 forms); ``error``: the stack address does not fit the block's LDS
#: (the instruction then has no effect, see :mod:`gpurtl.golden.ray_accel.ds_bvh_stack`).
STACK_RESPONSE_LAYOUT = data.StructLayout(
    {
        "stack_addr": STACK_ADDR_LAYOUT,
        "dst0": unsigned(32),
        "dst1": unsigned(32),
        "error": unsigned(1),
    }
)
