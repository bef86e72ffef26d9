"""Lockstep tests of the `fp32_rcp` block against gpurtl.golden.fp32 (pysim), with stalls."""

import pytest

from ._lockstep import check, latency_and_ii, million

NAME = "fp32_rcp"


def test_default_stages_cross_product_and_random():
    """Full special-value cross product + random vectors at the default stage count."""
    check(NAME)


def test_one_stage_ftz():
    check(NAME, count=800, stages=1, ftz=True)


def test_latency_and_ii():
    latency_and_ii(NAME)
    assert latency_and_ii(NAME, stages=2) == 2


@pytest.mark.slow
@pytest.mark.verilator
def test_million_vectors_verilator():
    million(NAME)
