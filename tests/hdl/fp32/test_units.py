"""Lockstep tests of the FP32 unit blocks against gpurtl.golden.fp32 (pysim), with stalls.

Every unit runs the same checks (parametrized by block name); the directed tests of single units
follow.
"""

import gc

import pytest

from gpurtl.hdl.fp32 import FPToIntCore, IntToFPCore
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

from ._lockstep import check, latency_and_ii, million

#: block name -> (vectors of the one-stage ftz run (``None``: the block's default), its seed,
#: a second stage count whose latency is checked)
UNITS = {
    "fp32_add": (1500, 0, 2),
    "fp32_mul": (1500, 0, 2),
    "fp32_fma": (800, 0, 2),
    "fp32_cmp": (None, 0, 2),
    "fp32_minmax": (None, 0, 2),
    "fp32_rcp": (800, 0, 2),
    "fp32_div": (800, 0, 2),
    "fp32_f2i": (1500, 2, 1),
    "fp32_i2f": (1500, 2, 1),
}


@pytest.mark.parametrize("name", UNITS)
def test_default_stages_cross_product_and_random(name):
    """Full special-value cross product + random vectors at the default stage count."""
    check(name)


@pytest.mark.parametrize("name", UNITS)
def test_one_stage_ftz(name):
    count, seed, _ = UNITS[name]
    check(name, count=count, stages=1, ftz=True, seed=seed)


@pytest.mark.parametrize("name", UNITS)
def test_latency_and_ii(name):
    latency_and_ii(name)
    stages = UNITS[name][2]
    assert latency_and_ii(name, stages=stages) == stages


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.parametrize("name", UNITS)
def test_million_vectors_verilator(name):
    million(name)


# --- directed tests of single units ---------------------------------------------------------------


def test_add_default_ftz():
    check("fp32_add", ftz=True, count=3000, seed=4)


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_add_verilator_cross_product_and_random():
    """The one Verilator build of the FP32 family in the default run."""
    block = registry.get("fp32_add")
    params = block.resolve({})
    report = BACKENDS["verilator"].check(block, params, count=10000, seed=9)
    assert report.failed == 0, str(report.first)
    assert report.passed == 10_000


@pytest.mark.parametrize("name,stages", [("fp32_f2i", 3), ("fp32_i2f", 2), ("fp32_i2f", 1)])
def test_convert_other_stage_counts(name, stages):
    check(name, count=1500, stages=stages, seed=stages)


# the constructors that raise leave objects that were never elaborated
@pytest.mark.filterwarnings("ignore:.*created but never used")
@pytest.mark.parametrize("cls,default,largest", [(FPToIntCore, 2, 3), (IntToFPCore, 3, 3)])
def test_convert_core_parameters(cls, default, largest):
    assert cls.DEFAULT_STAGES == default and cls.max_stages() == largest
    for stages in (None, 0, largest):
        core = cls(stages)
        assert core.latency == (default if stages is None else stages)
    with pytest.raises(ValueError, match=f"`stages` must be at most {largest}"):
        cls(largest + 1)
    with pytest.raises(TypeError, match="`stages` must be a non-negative integer, not -1"):
        cls(-1)
    with pytest.raises(TypeError, match="`ftz` must be a boolean"):
        cls(1, ftz=1)
    gc.collect()  # inside the warning filter
