"""The node fetch's RTL against its golden model, cycle by cycle, with random stalls on every
stream, and a wrong golden model caught."""

import numpy as np
import pytest

from gpurtl.golden.rt_unit import NodeFetchModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

from .compiled import COCOTB

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


@pytest.mark.parametrize("backend", COCOTB)
def test_lockstep_on_compiled_simulators(backend):
    params = BLOCK.resolve({"order": "l0"})  # the registry smoke test builds order "wave"
    count = {"verilator": 2000, "icarus": 400}[backend]  # Icarus: about 15 cycles/s here
    report = BACKENDS[backend].check(BLOCK, params, count=count, seed=4)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_lockstep_with_tree_plru_and_beats():
    """The replacement and beats parameters reach the node fetch's L0."""
    params = BLOCK.resolve(
        {"replacement": "plru", "size": 512, "ways": 4, "id_bits": 3, "beats": 4}
    )
    report = BACKENDS["pysim"].check(BLOCK, params, count=800, seed=6)
    assert report.failed == 0, str(report.first)
    assert report.passed == 800


DUAL = [
    {"dual": True},
    {"dual": True, "size": 512, "ways": 1, "mshrs": 2, "targets": 3, "id_bits": 1, "tag_bits": 2},
]


@pytest.mark.parametrize("overrides", DUAL, ids=str)
def test_dual_lockstep_random(overrides):
    """The dual build: the dual form's two node lines through the L0, random stalls."""
    params = BLOCK.resolve(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=800, seed=12)
    assert report.failed == 0, str(report.first)
    assert report.passed == 800


def test_dual_build_a_wrong_golden_second_node_is_caught(monkeypatch):
    """A golden model that cuts the second node from the wrong half of its line must fail."""
    from gpurtl.golden.rt_unit import node_fetch as golden_fetch

    original = golden_fetch.dual_node
    monkeypatch.setattr(golden_fetch, "dual_node", lambda line, ptr: original(line, ptr ^ 8))
    report = BACKENDS["pysim"].check(BLOCK, BLOCK.resolve(DUAL[0]), count=600, seed=12)
    assert report.failed > 0


def test_dual_needs_wave_order():
    with pytest.raises(registry.RegistryError, match="wave"):
        BLOCK.resolve({"dual": True, "order": "l0"})


@pytest.mark.parametrize("backend", [p for p in COCOTB if p.values[0] == "verilator"])
def test_dual_lockstep_on_verilator(backend):
    params = BLOCK.resolve({"dual": True, "id_bits": 3, "tag_bits": 2})
    report = BACKENDS[backend].check(BLOCK, params, count=2000, seed=4)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2000
