"""Lockstep tests of the `fp32_f2i` and `fp32_i2f` blocks (FPToIntCore / IntToFPCore) against
gpurtl.golden.fp32.f2i / i2f (pysim), with stalls; core parameter checks."""

import gc

import pytest

from gpurtl.hdl.fp32 import FPToIntCore, IntToFPCore

from ._lockstep import check, latency_and_ii, million

NAMES = ("fp32_f2i", "fp32_i2f")


@pytest.mark.parametrize("name", NAMES)
def test_default_stages_cross_product_and_random(name):
    """Special values x signed in {0, 1} + random vectors (2000) at the default stage count."""
    check(name)


@pytest.mark.parametrize("name", NAMES)
def test_one_stage_ftz(name):
    check(name, count=1500, stages=1, ftz=True, seed=2)


@pytest.mark.parametrize("name,stages", [("fp32_f2i", 3), ("fp32_i2f", 2), ("fp32_i2f", 1)])
def test_other_stage_counts(name, stages):
    check(name, count=1500, stages=stages, seed=stages)


@pytest.mark.parametrize("name", NAMES)
def test_latency_and_ii(name):
    latency_and_ii(name)
    assert latency_and_ii(name, stages=1) == 1


# the constructors that raise leave objects that were never elaborated
@pytest.mark.filterwarnings("ignore:.*created but never used")
@pytest.mark.parametrize("cls,default,largest", [(FPToIntCore, 2, 3), (IntToFPCore, 3, 3)])
def test_core_parameters(cls, default, largest):
    assert cls.DEFAULT_STAGES == default and cls.max_stages() == largest
    for stages in (None, 0, largest):
        core = cls(stages)
        core._MustUse__silence = True
        assert core.latency == (default if stages is None else stages)
    with pytest.raises(ValueError, match=f"`stages` must be at most {largest}"):
        cls(largest + 1)
    with pytest.raises(TypeError, match="`stages` must be a non-negative integer, not -1"):
        cls(-1)
    with pytest.raises(TypeError, match="`ftz` must be a boolean"):
        cls(1, ftz=1)
    gc.collect()                    # inside the warning filter


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.parametrize("name", NAMES)
def test_million_vectors_verilator(name):
    million(name)
