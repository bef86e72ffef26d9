"""The node fetch's RTL against its golden model, cycle by cycle, with random stalls on every
stream, and a wrong golden model caught."""

import numpy as np
import pytest

from gpurtl.golden.rt_unit import NodeFetchModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("node_fetch")

GEOMETRIES = [
    {},  # order "wave"
    {"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "id_bits": 3, "line_bits": 8},
    {"size": 512, "ways": 1, "mshrs": 2, "targets": 3, "id_bits": 1, "tag_bits": 2},  # 2 slots
    {"order": "l0", "id_bits": 2, "tag_bits": 1},
]


@pytest.mark.parametrize("overrides", GEOMETRIES, ids=str)
def test_lockstep_random(overrides):
    params = BLOCK.resolve(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=800, seed=12)
    assert report.failed == 0, str(report.first)
    assert report.passed == 800


def test_stimulus_fills_the_ray_buffer_and_stalls_the_output():
    params = BLOCK.resolve(GEOMETRIES[2])
    inputs = BLOCK.stimulus(np.random.default_rng(12), 800, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    refused = sum(i["inst"]["valid"] and not o["inst"]["ready"] for i, o in zip(inputs, outputs))
    stalled = sum(o["out"]["valid"] and not i["out"]["ready"] for i, o in zip(inputs, outputs))
    assert refused > 50 and stalled > 30
    assert sum(o["err"]["dual"] for o in outputs) >= 1


def test_a_wrong_golden_model_is_caught(monkeypatch):
    """A golden model that hands on the node's dwords in the wrong order must fail."""
    original = NodeFetchModel._instruction

    def swapped(self, entry, data):
        result = original(self, entry, data)
        result["instr"]["node"][0] = result["instr"]["node"][0][::-1]
        return result

    monkeypatch.setattr(NodeFetchModel, "_instruction", swapped)
    params = BLOCK.resolve(GEOMETRIES[1])
    report = BACKENDS["pysim"].check(BLOCK, params, count=600, seed=12)
    assert report.failed > 0
    params = BLOCK.resolve(GEOMETRIES[3])
    report = BACKENDS["pysim"].check(BLOCK, params, count=600, seed=12)
    assert report.failed > 0


@pytest.mark.verilator
def test_lockstep_on_verilator():
    params = BLOCK.resolve({"order": "l0"})  # the registry smoke test builds order "wave"
    report = BACKENDS["verilator"].check(BLOCK, params, count=2000, seed=4)
    assert report.failed == 0, str(report.first)
