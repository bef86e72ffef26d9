"""The LDS BVH stack block: a hand-worked instruction sequence on the RTL, random lockstep with
stalls on the Amaranth simulator and on Verilator."""

import numpy as np
import pytest

from gpurtl.facts.ds_bvh_stack import (
    INVALID_NODE,
    PRIM_RANGE_UPDATE,
    SKIP_0_7,
    STACK_RESPONSE_LAYOUT,
    StackOp,
)
from gpurtl.golden.ray_accel.ds_bvh_stack import BvhStackModel
from gpurtl.hdl.ray_accel.ds_bvh_stack import BvhStack
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.harness import golden_io
from gpurtl.sim.harness.engine import StallPattern

PARAMS = {"stack_size": 8, "waves": 2, "lanes": 4}
BOX = [0x1005 + 0x100 * k for k in range(16)]
INST = [0x80006, 0x90006]
TRI1, TRI3, TRI8 = 0x4001, 0x4003, 0x4008
NONE = INVALID_NODE
A, B = 1 * 8 * 32 + 2, 1  # bases of wave 1 lane 2 and wave 0 lane 1
P81, P82, P41 = StackOp.PUSH8_POP1, StackOp.PUSH8_POP2, StackOp.PUSH4_POP1


def sa(base, valid, etr, addr, tlas=0, ovf=0, b2t=0):
    return {
        "valid_entries": valid,
        "entries_to_tlas": etr,
        "addr": addr,
        "base": base,
        "has_tlas": tlas,
        "has_overflowed": ovf,
        "blas2tlas_pop": b2t,
    }


def tx(op, reg, data=(), last=NONE, prim=0):
    return {
        "op": op,
        "stack_addr": reg,
        "last_node_ptr": last,
        "data": list(data) + [NONE] * (8 - len(data)),
        "tri_size_opt": 0,
        "prim_range": prim,
    }


def out(reg, dst0, dst1=NONE, error=0):
    return {"stack_addr": reg, "dst0": dst0, "dst1": dst1, "error": error}


# Worked by hand from the rules (ring of 8; entry k of a lane at DWORD base + 32 k). Lane A
# overflows, drains, walks back; lane B crosses TLAS/BLAS, pops pairs and continues a primitive
# range. Consecutive instructions of a lane run back to back through the pipeline.
SEQUENCE = [
    # push 8 (slot 7 first), pop slot 0
    (tx(P81, sa(A, 0, 0, 0), BOX[:8]), out(sa(A, 7, 7, 7), BOX[0])),
    # 8 more pushes on 7 entries: overflow; entries 7, 0..6 hold BOX15..BOX8
    (tx(P81, sa(A, 7, 7, 7), BOX[8:]), out(sa(A, 7, 7, 6, ovf=1), BOX[8])),
    (tx(P81, sa(A, 7, 7, 6, ovf=1)), out(sa(A, 6, 6, 5, ovf=1), BOX[9])),
    # pop2 of two boxes returns (second, first)
    (tx(P82, sa(A, 6, 6, 5, ovf=1)), out(sa(A, 4, 4, 3, ovf=1), BOX[11], BOX[10])),
    (tx(P41, sa(A, 4, 4, 3, ovf=1)), out(sa(A, 3, 3, 2, ovf=1), BOX[12])),
    (tx(P81, sa(A, 3, 3, 2, ovf=1)), out(sa(A, 2, 2, 1, ovf=1), BOX[13])),
    (tx(P81, sa(A, 2, 2, 1, ovf=1)), out(sa(A, 1, 1, 0, ovf=1), BOX[14])),
    (tx(P81, sa(A, 1, 1, 0, ovf=1)), out(sa(A, 0, 0, 7, ovf=1), BOX[15])),
    # empty after an overflow: INVALID_NODE (walk back)
    (tx(P81, sa(A, 0, 0, 7, ovf=1)), out(sa(A, 0, 0, 7, ovf=1), NONE)),
    # walk-back into the first node, last visited child = slot 3: push slots 7..4, pop slot 4
    (tx(P81, sa(A, 0, 0, 7, ovf=1), BOX[:8], last=BOX[3]), out(sa(A, 3, 3, 2, ovf=1), BOX[4])),
    # lane B: an instance pops first: BLAS begins
    (tx(P81, sa(B, 0, 0, 0), [INST[0], BOX[1], BOX[2]]), out(sa(B, 2, 0, 2, tlas=1), INST[0])),
    # the instance result pushes the BLAS root only
    (
        tx(P81, sa(B, 2, 0, 2, tlas=1), [NONE] * 6 + [SKIP_0_7, BOX[9]]),
        out(sa(B, 2, 0, 2, tlas=1), BOX[9]),
    ),
    # the BLAS is done: back to the TLAS
    (tx(P81, sa(B, 2, 0, 2, tlas=1)), out(sa(B, 1, 0, 1, b2t=1), BOX[1])),
    # pop2: a TRIANGLE_1 first gives both triangles of the pair
    (tx(P82, sa(B, 1, 0, 1), [TRI1, BOX[5]]), out(sa(B, 2, 1, 2), TRI1 & ~7, TRI1)),
    # pop2 does not pop an instance node
    (tx(P82, sa(B, 2, 1, 2), [BOX[0], INST[1]]), out(sa(B, 3, 2, 3), BOX[0], NONE)),
    # primitive range, END_OF_PAIR: pair 3 -> pair 4 (type 8)
    (
        tx(P81, sa(B, 3, 2, 3), [NONE] * 7 + [TRI3], last=PRIM_RANGE_UPDATE, prim=1),
        out(sa(B, 3, 2, 3), TRI8),
    ),
    # END_OF_RANGE: nothing pushed; the instance below is popped
    (
        tx(P81, sa(B, 3, 2, 3), [NONE] * 7 + [TRI8], last=PRIM_RANGE_UPDATE | 2, prim=1),
        out(sa(B, 2, 0, 2, tlas=1), INST[1]),
    ),
    # misuse: lane 5 of a 4-lane LDS, an unknown opcode
    (tx(P81, sa(5, 0, 0, 0), BOX[:8]), out(sa(5, 0, 0, 0), NONE, NONE, 1)),
    (tx(0, sa(A, 3, 3, 2, ovf=1), BOX[:8]), out(sa(A, 3, 3, 2, ovf=1), NONE, NONE, 1)),
    # lane A again: its entries survived lane B's traffic
    (tx(P81, sa(A, 3, 3, 2, ovf=1)), out(sa(A, 2, 2, 1, ovf=1), BOX[5])),
]


def test_golden_follows_the_worked_sequence():
    model = BvhStackModel(**PARAMS)
    for k, (request, expected) in enumerate(SEQUENCE):
        assert model(request) == expected, k


def test_harness_keeps_one_stateful_model_in_order():
    # the lockstep harness must feed every transaction to one model, in order
    block = registry.get("ds_bvh_stack")
    expected = [e for _, e in SEQUENCE]
    assert (
        golden_io.golden_outputs(block, block.resolve(PARAMS), [r for r, _ in SEQUENCE]) == expected
    )


def test_stimulus_covers_the_rules():
    block = registry.get("ds_bvh_stack")
    params = block.resolve({})
    inputs = block.stimulus(np.random.default_rng(0), 2000, **params)
    seen = {}
    for request, response in zip(inputs, golden_io.golden_outputs(block, params, inputs)):
        last, op, reg = request["last_node_ptr"], int(request["op"]), response["stack_addr"]
        for rule, hit in [
            ("error", response["error"]),
            ("push4", op == StackOp.PUSH4_POP1),
            ("walk-back", last >> 3 != 0x1FFFFFFF),
            ("range update", request["prim_range"] and last >> 2 == PRIM_RANGE_UPDATE >> 2),
            ("end of range", request["prim_range"] and last == PRIM_RANGE_UPDATE | 2),
            ("overflowed empty", response["dst0"] == NONE and not response["error"]),
            ("clean empty", response["dst0"] == 0xFFFFFFFE),
            ("blas2tlas pop", reg["blas2tlas_pop"]),
            ("instance pop", response["dst0"] & 7 == 6 and response["dst0"] >> 3 != 0x1FFFFFFF),
            (
                "pair pop",
                op == StackOp.PUSH8_POP2
                and response["dst1"] & 7 == 1
                and response["dst0"] == response["dst1"] & ~7,
            ),
            (
                "second pop",
                op == StackOp.PUSH8_POP2 and response["dst1"] != NONE and response["dst1"] & 7 != 1,
            ),
            (
                "second pop refused",
                op == StackOp.PUSH8_POP2 and response["dst1"] == NONE and reg["valid_entries"] > 0,
            ),
            ("full", reg["valid_entries"] == params["stack_size"] - 1),
        ]:
            seen[rule] = seen.get(rule, 0) + bool(hit)
    assert min(seen.values()) >= 10, seen


@pytest.mark.parametrize("stalls", [StallPattern(), StallPattern(seed=4, p_valid=0.5, p_ready=0.4)])
def test_rtl_follows_the_worked_sequence(stalls):
    block = registry.get("ds_bvh_stack")
    params = block.resolve(PARAMS)
    report = BACKENDS["pysim"].run(
        block, params, [r for r, _ in SEQUENCE], stalls=stalls, keep_outputs=True
    )
    got = [layouts.unpack(STACK_RESPONSE_LAYOUT, bits) for bits in report.outputs]
    for k, (_, expected) in enumerate(SEQUENCE):
        assert got[k] == expected, k
    if stalls.p_valid == 1.0:
        assert report.cycles == len(SEQUENCE) + BvhStack(**PARAMS).latency  # II = 1


def _check(count, seed, **params):
    block = registry.get("ds_bvh_stack")
    report = BACKENDS["pysim"].check(block, block.resolve(params), count=count, seed=seed)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_lockstep_default():
    _check(800, 1)


def test_lockstep_small_lds():
    _check(600, 2, **PARAMS)


def test_lockstep_lds_state_matters():
    # a golden model that forgets the LDS between transactions must disagree with the RTL
    block = registry.get("ds_bvh_stack")
    params = block.resolve({})
    inputs = block.stimulus(np.random.default_rng(5), 300, **params)
    forgetful = [BvhStackModel(**params)(request) for request in inputs]
    report = BACKENDS["pysim"].run(block, params, inputs, expected=forgetful)
    assert report.failed > 10


def test_parameters():
    assert BvhStack().latency == 4 and BvhStack().bank_depth == 2 * 16 // 8 * 32
    for bad in ({"stack_size": 12}, {"lanes": 3}, {"waves": 0}, {"waves": 40}):
        with pytest.raises(ValueError, match=f"`{next(iter(bad))}"):
            BvhStack(**bad)


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_lockstep_verilator():
    block = registry.get("ds_bvh_stack")
    report = BACKENDS["verilator"].check(block, block.resolve(PARAMS), count=300, seed=9)
    assert report.failed == 0, str(report.first)
    assert report.passed == 300
