"""The LDS traversal stack seen by the traversal loop: the golden ``ds_bvh_stack`` model
(:mod:`gpurtl.golden.ray_accel.ds_bvh_stack`) on one lane, with the names the loop uses."""

from gpurtl.facts.ds_bvh_stack import StackOp
from gpurtl.golden.ray_accel.ds_bvh_stack import (
    LdsMemory,
    ds_bvh_stack,
    pack_stack_addr,
    push_slots,
    unpack_stack_addr,
)

__all__ = [
    "PUSH4_POP1",
    "PUSH8_POP1",
    "PUSH8_POP2",
    "SOURCE",
    "LdsMemory",
    "initial_stack_addr",
    "push_slots",
    "stack_op",
    "unpack_stack_addr",
]

PUSH4_POP1, PUSH8_POP1, PUSH8_POP2 = (
    int(StackOp.PUSH4_POP1),
    int(StackOp.PUSH8_POP1),
    int(StackOp.PUSH8_POP2),
)
SOURCE = "golden ds_bvh_stack"


def initial_stack_addr(base):
    """The ADDR register of an empty stack whose entry 0 is LDS DWORD ``base``."""
    return pack_stack_addr(
        {
            "valid_entries": 0,
            "entries_to_tlas": 0,
            "addr": 0,
            "base": base,
            "has_tlas": 0,
            "has_overflowed": 0,
            "blas2tlas_pop": 0,
        }
    )


def stack_op(op, stack_addr, last_node_ptr, data, lds, *, stack_size, prim_range=False):
    """``(new_stack_addr, dst)`` of one lane's stack instruction (``dst`` a pair for pop2)."""
    return ds_bvh_stack(
        op, stack_addr, last_node_ptr, data, lds, stack_size=stack_size, prim_range=prim_range
    )
