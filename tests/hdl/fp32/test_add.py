"""Lockstep tests of the `fp32_add` block against gpurtl.golden.fp32 (pysim), with stalls."""

import pytest

from ._lockstep import check, latency_and_ii, million

NAME = "fp32_add"


def test_default_stages_cross_product_and_random():
    """Full special-value cross product + random vectors at the default stage count."""
    check(NAME)


def test_one_stage_ftz():
    check(NAME, count=1500, stages=1, ftz=True)


def test_latency_and_ii():
    latency_and_ii(NAME)
    assert latency_and_ii(NAME, stages=2) == 2


@pytest.mark.slow
@pytest.mark.verilator
def test_million_vectors_verilator():
    million(NAME)


def test_default_ftz():
    check(NAME, ftz=True, count=3000, seed=4)


@pytest.mark.verilator
def test_verilator_cross_product_and_random():
    """The one Verilator build of the FP32 family in the default run."""
    from gpurtl.sim import lockstep, registry
    block = registry.get(NAME)
    params = block.resolve({})
    report = lockstep.check(block, params, count=10_000, seed=9, backend="verilator")
    assert report.failed == 0, str(report.first)
    assert report.passed == 10_000
