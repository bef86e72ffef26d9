"""EU issue block: lockstep against the golden model with random programs and stalls, the
stimulus's coverage, a wrong scoreboard caught, and a hand-worked schedule on the RTL."""

import numpy as np
import pytest

from gpurtl.facts.eu import ExecSize, Op, Type
from gpurtl.golden.eu import EuIssueModel, encode
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("eu")


@pytest.mark.parametrize(
    "params, count",
    [
        ({"threads": 3, "depth": 8, "hit_latency": 6, "miss_latency": 14}, 1500),
        ({}, 400),  # Gen7.5: 7 threads, 96 bytes a clock
        ({"threads": 10, "depth": 4, "read_bytes": 8, "fp_latency": 1}, 400),  # Xe3 count
        ({"threads": 8, "read_bytes": 512, "math_latency": 1}, 300),  # Xe-HPG/Xe2 count
    ],
)
def test_lockstep_random(params, count):
    params = BLOCK.resolve(params)
    report = BACKENDS["pysim"].check(BLOCK, params, count=count, seed=7)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_stimulus_reaches_the_corners():
    params = BLOCK.resolve({})
    inputs = BLOCK.stimulus(np.random.default_rng(7), 3000, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    slots = [o["issue"] for o in outputs]
    seen = {
        "single": sum(s[0]["valid"] and not s[1]["valid"] for s in slots),
        "dual": sum(s[1]["valid"] for s in slots),
        "pipe1_alone": sum(s[0]["valid"] and s[0]["pipe"] for s in slots),
        "illegal": sum(s[0]["illegal"] for s in slots),
        "full_buffer": sum(o["credit"] == 192 for o in outputs),
        "low_credit": sum(0 < o["credit"] < 64 for o in outputs),
        "held_by_hold": sum(i["hold"] and o["active"] != 0 for i, o in zip(inputs, outputs)),
        "restarts": sum(i["start"]["valid"] for i in inputs),
    }
    assert seen["single"] > 300 and seen["dual"] > 30, seen
    assert seen["pipe1_alone"] > 5 and seen["illegal"] > 0, seen
    assert seen["full_buffer"] > 50 and seen["low_credit"] > 10, seen
    assert seen["held_by_hold"] > 50 and seen["restarts"] > 3, seen


class IgnoresDestinations(EuIssueModel):
    """A wrong scoreboard: never waits for a pending destination (write after write)."""

    def regs_clear(self, t, d):
        return not any(self.pending(t, r) for r in d.srcs)


class IgnoresEverything(EuIssueModel):
    """A wrong scoreboard: no dependency check at all."""

    def pending(self, t, r):
        return False


@pytest.mark.parametrize("wrong", [IgnoresDestinations, IgnoresEverything])
def test_lockstep_detects_a_wrong_scoreboard(wrong):
    params = BLOCK.resolve({"threads": 3, "depth": 8})
    inputs = BLOCK.stimulus(np.random.default_rng(3), 400, **params)
    model = wrong(**params)
    expected = [model.step(i) for i in inputs]
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed > 0
    assert report.first.field.startswith("issue")


def test_rtl_same_register_schedule_by_hand():
    # Three threads of r0 = r0 + r0 (float, fp_latency 4), a wide port: thread 0 and 1 pair at
    # clock 0, thread 2 goes alone at clock 1 (thread 0 is waiting for r0), thread 0 and 1
    # again at clock 4, thread 2 at 5.
    params = BLOCK.resolve({"threads": 3, "depth": 4, "read_bytes": 512, "fp_latency": 4})
    idle = BLOCK.input_defaults(params)
    program = [encode(op=Op.ADD, size=ExecSize.SIMD8, type=Type.F) for _ in range(3)]
    program.append(encode(op=Op.NOP, eot=1))
    inputs = []
    for t in range(3):
        for a, word in enumerate(program):
            inputs.append({**idle, "load": {"valid": 1, "thread": t, "addr": a, "inst": word}})
    inputs.append({**idle, "start": {"valid": 1, "mask": 0b111, "passes": 1}})
    inputs += [idle] * 7
    report = BACKENDS["pysim"].run(
        BLOCK,
        params,
        inputs,
        expected=golden_io.golden_outputs(BLOCK, params, inputs),
        keep_outputs=True,
    )
    assert report.failed == 0, str(report.first)
    _, out_layout = BLOCK.layouts(**params)
    outputs = [layouts.unpack(out_layout, bits) for bits in report.outputs]
    issued = [
        {s["thread"] for s in o["issue"] if s["valid"]} for o in outputs[len(program) * 3 + 1 :]
    ]
    assert issued == [{0, 1}, {2}, set(), set(), {0, 1}, {2}, set()]


@pytest.mark.verilator
def test_eu_on_verilator():
    params = BLOCK.resolve(BLOCK.small)
    report = BACKENDS["verilator"].check(BLOCK, params, count=2000, seed=5)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2000
