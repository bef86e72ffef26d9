"""The L0 cache's RTL against its golden model, cycle by cycle: random traffic with random
valid/ready stalls on all four streams, out-of-order fills and misuse, over several geometries;
the stimulus reaches every case; a wrong golden model is caught."""

import numpy as np
import pytest

from gpurtl.golden.rt_unit import HIT, MISS, PENDING, L0CacheModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("l0_cache")

GEOMETRIES = [
    {},  # the default build: 2 KB, 4 ways, 4 MSHRs x 4 targets
    {"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "line_bits": 8},
    {"size": 512, "ways": 1, "mshrs": 1, "targets": 1},  # direct mapped, one miss at a time
    {"size": 1024, "ways": 8, "mshrs": 3, "targets": 5, "id_bits": 3},  # one set: fully assoc.
]


@pytest.mark.parametrize("overrides", GEOMETRIES, ids=lambda o: str(o.get("size", "default")))
def test_lockstep_random(overrides):
    params = BLOCK.resolve(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=2000, seed=11)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2000


def test_stimulus_reaches_every_case():
    params = BLOCK.resolve()
    inputs = BLOCK.stimulus(np.random.default_rng(11), 2000, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    kinds = [o["event"]["kind"] for o in outputs if o["event"]["valid"]]
    for kind in (HIT, PENDING, MISS):
        assert kinds.count(kind) > 30, kind
    assert sum(o["err"]["unexpected_fill"] for o in outputs) >= 1
    refused = [i["req"]["valid"] and not o["req"]["ready"] for i, o in zip(inputs, outputs)]
    assert sum(refused) > 50
    stalled = [o["resp"]["valid"] and not i["resp"]["ready"] for i, o in zip(inputs, outputs)]
    assert sum(stalled) > 50
    assert sum(not o["fill"]["ready"] and i["fill"]["valid"] for i, o in zip(inputs, outputs))
    # The sources keep to the stream rule: an offer not taken is offered again unchanged.
    for name in ("req", "fill"):
        for k in range(1, len(inputs)):
            before, now = inputs[k - 1][name], inputs[k][name]
            if before["valid"] and not outputs[k - 1][name]["ready"]:
                assert now == before


def test_a_wrong_golden_model_is_caught(monkeypatch):
    """With the golden model's replacement turned into FIFO (a hit no longer refreshes its way),
    the lockstep check must fail."""
    original = L0CacheModel._touch

    def fifo(self, s, way):
        if self.tags[s][way] is None or self.tags[s][way][1] or self.lru[s][0] == way:
            original(self, s, way)

    monkeypatch.setattr(L0CacheModel, "_touch", fifo)
    params = BLOCK.resolve({"size": 512, "ways": 4})
    report = BACKENDS["pysim"].check(BLOCK, params, count=2000, seed=11)
    assert report.failed > 0


def test_unexpected_fill_on_the_rtl():
    params = BLOCK.resolve()
    idle = BLOCK.input_defaults(params)
    bogus = dict(idle, fill={"valid": 1, "payload": {"line": 77, "data": 5}})
    request = dict(idle, req={"valid": 1, "payload": {"id": 3, "line": 77}})
    inputs = [bogus, request, idle, idle]
    expected = golden_io.golden_outputs(BLOCK, params, inputs)
    assert [o["err"]["unexpected_fill"] for o in expected] == [1, 0, 0, 0]
    assert expected[1]["event"] == {"valid": 1, "kind": MISS}
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed == 0, str(report.first)


def test_bad_geometry_is_refused():
    with pytest.raises(registry.RegistryError, match="power-of-two number of sets"):
        BLOCK.resolve({"size": 1536, "ways": 4})
    with pytest.raises(registry.RegistryError, match="`ways` must be"):
        BLOCK.resolve({"ways": 3})


@pytest.mark.verilator
def test_lockstep_on_verilator():
    params = BLOCK.resolve()
    report = BACKENDS["verilator"].check(BLOCK, params, count=3000, seed=4)
    assert report.failed == 0, str(report.first)
    assert report.passed == 3000


@pytest.mark.verilator
def test_exported_verilog_lints_clean():
    params = BLOCK.resolve()
    ok, messages = export.lint(export.to_verilog(BLOCK, params), "l0_cache")
    assert ok, messages
