"""Shared test driver: a registered ray-accelerator block in the Amaranth simulator, every
result against its golden reference, and the timing of the stall-free first half."""

import numpy as np

from gpurtl.sim.backends.pysim import simulate
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.harness import lockstep
from gpurtl.sim.harness.engine import StallPattern, drive_pipeline

__all__ = ["run_lockstep"]


def run_lockstep(name, overrides, count, seed):
    """Drive ``count`` random transactions of block ``name`` built with ``overrides`` (the first
    half stall-free, then random valid/ready stalls) and check every result, that the stall-free
    half is accepted every ``initiation_interval`` cycles and comes out exactly ``latency``
    cycles later. Returns the DUT."""
    block = registry.get(name)
    params = block.resolve(overrides)
    inputs = block.stimulus(np.random.default_rng(seed), count, **params)
    expected = lockstep.golden_outputs(block, params, inputs)
    in_l, out_l = block.layouts(**params)
    bits = [layouts.pack(in_l, tx) for tx in inputs]
    want = [layouts.pack(out_l, out) for out in expected]
    dut = block.build(**params)
    events = []
    free = count // 2
    stalls = StallPattern(seed=seed, p_valid=0.7, p_ready=0.6, free_run=free)
    simulate(dut, lambda io: drive_pipeline(io, bits, stalls, events.append))
    assert len(events) == count
    for ev in events:
        difference = layouts.diff(out_l, want[ev.index], ev.bits)
        assert difference is None, (
            f"transaction {ev.index}: field {difference[0].path} expected {difference[1]:#x}, "
            f"got {difference[2]:#x} (input {inputs[ev.index]})"
        )
    ii = getattr(dut, "initiation_interval", 1)
    for ev in events[:free]:
        assert ev.accept_cycle == ii * ev.index, "not accepted at the full rate"
        assert ev.emit_cycle - ev.accept_cycle == dut.latency
    return dut
