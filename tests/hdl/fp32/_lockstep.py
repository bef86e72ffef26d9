"""Helpers shared by the FP32 unit tests: lockstep runs, latency/II and Verilator runs."""

import numpy as np

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io
from gpurtl.sim.harness.engine import StallPattern

__all__ = ["check", "latency_and_ii", "million"]


def check(name, *, count=None, seed=0, **params):
    """Lockstep check of block ``name`` (pysim): special cross product + random vectors, the
    first tenth without stalls (exact latency), the rest with random valid/ready stalls."""
    block = registry.get(name)
    resolved = block.resolve({k: str(v) for k, v in params.items()})
    report = BACKENDS["pysim"].check(block, resolved, count=count, seed=seed)
    assert report.failed == 0, f"{name} {resolved}: {report.line()}; first: {report.first}"
    expected = block.check_count if count is None else count
    assert report.passed == expected
    return report


def latency_and_ii(name, ops=40, **params):
    """N operations, no stalls: they take N + latency cycles (II = 1) and each exactly latency."""
    block = registry.get(name)
    resolved = block.resolve({k: str(v) for k, v in params.items()})
    dut = block.build(**resolved)
    inputs = block.stimulus(np.random.default_rng(3), ops, **resolved)
    expected = golden_io.golden_outputs(block, resolved, inputs)
    report = BACKENDS["pysim"].run(
        block, resolved, inputs, expected=expected, stalls=StallPattern(free_run=ops)
    )
    assert report.failed == 0, str(report.first)
    assert report.cycles == ops + dut.latency
    assert dut.latency == resolved["stages"]
    return dut.latency


def million(name, count=1_000_000, **params):
    """The >= 1M-vector cocotb-on-Verilator run of one unit (slow tests)."""
    block = registry.get(name)
    resolved = block.resolve({k: str(v) for k, v in params.items()})
    report = BACKENDS["verilator"].check(block, resolved, count=count, seed=7)
    assert report.failed == 0, f"{name}: {report.line()}; first: {report.first}"
    assert report.passed == count
    return report
