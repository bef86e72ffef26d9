"""The RT unit top's RTL against its golden model, cycle by cycle (node fetch, the smallest ray
accelerator build, the wait counters), and a golden model with the wrong accelerator timing
caught."""

import pytest

from gpurtl.golden.rt_unit import AccelTiming
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

from .compiled import COCOTB

BLOCK = registry.get("rt_unit")


@pytest.mark.parametrize("count", [60, pytest.param(150, marks=pytest.mark.full)])
def test_lockstep_random(count):
    params = BLOCK.small_params()
    report = BACKENDS["pysim"].check(BLOCK, params, count=count, seed=3)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


@pytest.mark.slow  # a second elaboration of the accelerator
def test_a_wrong_accelerator_timing_is_caught(monkeypatch):
    original = AccelTiming.__init__

    def one_more(self, model, groups, depth):
        original(self, model, groups, depth + 1)

    monkeypatch.setattr(AccelTiming, "__init__", one_more)
    report = BACKENDS["pysim"].check(BLOCK, BLOCK.small_params(), count=120, seed=3)
    assert report.failed > 0


@pytest.mark.parametrize("backend", COCOTB)
def test_lockstep_on_compiled_simulators(backend):
    params = BLOCK.resolve({"tag_bits": 3})
    count = {"verilator": 2000, "icarus": 300}[backend]  # Icarus: about 10 cycles/s here
    report = BACKENDS[backend].check(BLOCK, params, count=count, seed=4)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


@pytest.mark.full  # about 45 s on pysim: the accelerator's elaboration and simulation
@pytest.mark.parametrize("count", [150])
def test_dual_lockstep_random(count):
    """The dual build (``dual=True``): the dual form's two node lines through the L0 into the
    accelerator, with random stalls."""
    params = BLOCK.small_params() | {"dual": True}
    params = BLOCK.resolve(params)
    report = BACKENDS["pysim"].check(BLOCK, params, count=count, seed=3)
    assert report.failed == 0, str(report.first)
    assert report.passed == count
