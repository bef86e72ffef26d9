"""Lockstep checks of the OBB / instance ray-transform RTL against the golden models."""

import numpy as np
import pytest

from gpurtl.golden.ray_accel.scalar import obb as obb_model
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry


def _check(name, count, **params):
    block = registry.get(name)
    report = BACKENDS["pysim"].check(block, block.resolve(params), count=count, seed=7)
    assert report.failed == 0, str(report.first)
    assert report.passed == count
    return report


@pytest.mark.full
def test_obb_transform_every_index():
    # the stimulus starts with every index 0..103 and 0x7F in order, then random ones
    _check("obb_transform", 115, fma_stages=1)


@pytest.mark.parametrize("count", [4, pytest.param(24, marks=pytest.mark.full)])
def test_obb_transform_dual_lanes(count):
    _check("obb_transform", count, fma_stages=2, lanes=2)


@pytest.mark.parametrize("count", [20, pytest.param(60, marks=pytest.mark.full)])
def test_instance_transform(count):
    _check("instance_transform", count, fma_stages=1)


def test_latency_and_units():
    from gpurtl.hdl.ray_accel.instance_transform import InstanceCore
    from gpurtl.hdl.ray_accel.obb_transform import OBBTransformCore

    assert OBBTransformCore(fma_stages=3).latency == 9
    assert OBBTransformCore(lanes=2).fma_units == 36
    assert InstanceCore(fma_stages=2).latency == 6
    with pytest.raises(ValueError, match="`lanes` must be 1 or 2"):
        OBBTransformCore(lanes=3)
    with pytest.raises(ValueError, match="requires `lanes` = 1"):
        OBBTransformCore(lanes=2, with_matrix=True)


def test_stimulus_covers_every_index():
    block = registry.get("obb_transform")
    txs = block.stimulus(np.random.default_rng(0), 200, **block.resolve({}))
    seen = {tx["index"] for tx in txs}
    assert set(range(obb_model.OBB_COUNT)) | {0x7F} <= seen
    assert any(104 <= i < 127 for i in seen)


@pytest.mark.slow
@pytest.mark.verilator
def test_obb_transform_verilator():
    """obb_transform (lanes=1, 18 FMA units) on Verilator. Marked slow: the Verilator build of
    18 FP32 FMA cores takes several minutes on the shared 2-core machine."""
    block = registry.get("obb_transform")
    report = BACKENDS["verilator"].check(block, block.resolve({"fma_stages": 1}), count=400, seed=3)
    assert report.failed == 0, str(report.first)
    assert report.passed == 400
