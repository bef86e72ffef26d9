"""The instruction cache's RTL against its golden model, cycle by cycle: random programs with
random valid/ready stalls on every stream, kernel-entry and ``s_prefetch_inst`` requests, random
prefetch distances, out-of-order fills and stray ones, over several geometries; the stimulus
reaches every case; a wrong golden model is caught."""

import numpy as np
import pytest

from gpurtl.golden.icache import HIT, MISS, PENDING, ICacheCore, ICacheModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry
from gpurtl.sim.harness import golden_io

from ...sim.backends.test_conformance import backend_params

BLOCK = registry.get("icache")

GEOMETRIES = [
    {},  # 2 KB, 4 ways, 4 miss registers, entry prefetch up to 64 lines
    {"size": 1024, "ways": 2, "mshrs": 2, "line_bits": 8, "entry_lines": 8},
    {"size": 512, "ways": 1, "mshrs": 1},  # direct mapped, one line missing at a time
    {"size": 1024, "ways": 8, "mshrs": 3, "entry_lines": 256},  # one set
]


def geometry_id(overrides):
    return "-".join(f"{k}{v}" for k, v in overrides.items()) or "default"


@pytest.mark.parametrize("overrides", GEOMETRIES, ids=geometry_id)
def test_lockstep_random(overrides):
    params = BLOCK.resolve(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=2500, seed=5)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2500


@pytest.mark.parametrize("seed", [1, 2])
def test_stimulus_reaches_every_case(seed):
    params = BLOCK.resolve()
    inputs = BLOCK.stimulus(np.random.default_rng(seed), 4000, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    kinds = [o["event"]["kind"] for o in outputs if o["event"]["valid"]]
    assert kinds.count(HIT) > 300 and kinds.count(MISS) > 30 and kinds.count(PENDING) >= 3
    assert sum(o["event"]["issue"] for o in outputs) > 100
    assert sum(o["err"]["unexpected_fill"] for o in outputs) >= 5
    pairs = list(zip(inputs, outputs))
    for name in ("fetch", "start", "pf"):
        assert sum(i[name]["valid"] and o[name]["ready"] for i, o in pairs) > 5, name
        assert sum(i[name]["valid"] and not o[name]["ready"] for i, o in pairs) > 5, name
        for k in range(1, len(inputs)):  # an offer not taken is offered again unchanged
            if inputs[k - 1][name]["valid"] and not outputs[k - 1][name]["ready"]:
                assert inputs[k][name] == inputs[k - 1][name]
    assert sum(o["resp"]["valid"] and not i["resp"]["ready"] for i, o in pairs) > 50
    # The block's own offers keep to the rule too (the RTL's equal the golden model's).
    for name in ("resp", "mem_req"):
        held = 0
        for k in range(1, len(inputs)):
            if outputs[k - 1][name]["valid"] and not inputs[k - 1][name]["ready"]:
                assert outputs[k][name] == outputs[k - 1][name]
                held += 1
        assert held > 10, name
    assert len({i["distance"] for i in inputs}) == 4


def test_stimulus_asks_for_more_entry_lines_than_the_block_takes():
    params = BLOCK.resolve()
    longest = [
        max(i["start"]["payload"]["lines"] for i in BLOCK.stimulus(rng, 4000, **params))
        for rng in (np.random.default_rng(seed) for seed in (1, 2, 3))
    ]
    assert max(longest) > params["entry_lines"]


def test_a_wrong_golden_model_is_caught(monkeypatch):
    """With prefetch hits made most recent in the golden model (the RTL leaves them alone),
    the lockstep check must fail."""
    original = ICacheCore.lookup
    step = ICacheModel.step

    def touching_step(self, inputs):
        seq = self.seq if self.seq[1] else self.rng if self.rng[1] else None
        hit = None
        if seq is not None:
            kind, way = original(self.core, seq[0])
            hit = (seq[0], way) if kind != MISS else None
        outputs = step(self, inputs)
        if hit is not None and not outputs["event"]["valid"]:
            self.core.touch(*hit)
        return outputs

    monkeypatch.setattr(ICacheModel, "step", touching_step)
    params = BLOCK.resolve({"size": 512, "ways": 2})
    report = BACKENDS["pysim"].check(BLOCK, params, count=2500, seed=5)
    assert report.failed > 0


def test_bad_geometry_is_refused():
    with pytest.raises(registry.RegistryError, match="power-of-two number of sets"):
        BLOCK.resolve({"size": 1536, "ways": 4})
    with pytest.raises(registry.RegistryError, match="`entry_lines` must be"):
        BLOCK.resolve({"entry_lines": 300})


COCOTB = [p for p in backend_params() if p.values[0] == "verilator"]


@pytest.mark.parametrize("backend", COCOTB)
def test_lockstep_on_verilator(backend):
    params = BLOCK.resolve(BLOCK.small)
    report = BACKENDS[backend].check(BLOCK, params, count=3000, seed=4)
    assert report.failed == 0, str(report.first)
    assert report.passed == 3000


@pytest.mark.verilator
def test_exported_verilog_lints_clean():
    params = BLOCK.resolve(BLOCK.small)
    ok, messages = export.lint(export.to_verilog(BLOCK, params), "icache")
    assert ok, messages
