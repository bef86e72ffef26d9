"""Shared test driver: a registered ray-accelerator block in the Amaranth simulator, every
result against its golden reference, and the timing of the stall-free first half."""

import types

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

__all__ = ["run_lockstep"]


def run_lockstep(name, overrides, count, seed):
    """Check ``count`` random transactions of block ``name`` built with ``overrides`` (the first
    half stall-free, then random valid/ready stalls): every result, that the stall-free half is
    accepted every ``initiation_interval`` cycles and comes out exactly ``latency`` cycles later.
    Returns the build's ``latency``, ``initiation_interval`` and ``box_latency``."""
    block = registry.get(name)
    params = block.resolve(overrides)
    report = BACKENDS["pysim"].check(
        block, params, count=count, seed=seed, p_valid=0.7, p_ready=0.6, free_run=count // 2
    )
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == count
    return registry.component_facts(
        lambda: block.build(**params),
        lambda dut: types.SimpleNamespace(
            latency=dut.latency,
            initiation_interval=getattr(dut, "initiation_interval", 1),
            box_latency=getattr(dut, "box_latency", None),
        ),
    )
