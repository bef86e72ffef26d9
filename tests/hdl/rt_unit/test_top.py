"""The RT unit top's RTL against its golden model, cycle by cycle (node fetch, the smallest ray
accelerator build, the wait counters), and a golden model with the wrong accelerator timing
caught."""

import pytest

from gpurtl.golden.rt_unit import AccelTiming
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

BLOCK = registry.get("rt_unit")


def test_lockstep_random():
    params = BLOCK.small_params()
    report = BACKENDS["pysim"].check(BLOCK, params, count=150, seed=3)
    assert report.failed == 0, str(report.first)
    assert report.passed == 150


@pytest.mark.slow  # a second elaboration of the accelerator
def test_a_wrong_accelerator_timing_is_caught(monkeypatch):
    original = AccelTiming.__init__

    def one_more(self, model, groups, depth):
        original(self, model, groups, depth + 1)

    monkeypatch.setattr(AccelTiming, "__init__", one_more)
    report = BACKENDS["pysim"].check(BLOCK, BLOCK.small_params(), count=120, seed=3)
    assert report.failed > 0


@pytest.mark.verilator
def test_lockstep_on_verilator():
    params = BLOCK.resolve({"tag_bits": 3})
    report = BACKENDS["verilator"].check(BLOCK, params, count=2000, seed=4)
    assert report.failed == 0, str(report.first)
