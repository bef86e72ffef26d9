"""`gpurtl synth` on a small unit: place-and-route figures, and the synthesis-only estimate
agrees with them (the estimate is what the README gives for designs larger than the device)."""

import pytest

from gpurtl.sim import registry
from gpurtl.sim.synth import synthesize


def test_synth_only_estimate_matches_place_and_route(tmp_path):
    block = registry.get("fp32_cmp")
    params = block.resolve({})
    placed = synthesize(block, params, workdir=tmp_path / "pnr")
    estimate = synthesize(block, params, workdir=tmp_path / "syn", synth_only=True)
    assert placed["fmax_mhz"] and placed["fmax_mhz"] > 50
    assert estimate["fmax_mhz"] is None
    assert placed["ff"] == estimate["ff"] > 0
    # nextpnr adds a few route-through LUTs to yosys's LUT4 + 2 x CCU2C count
    assert 0.9 * placed["lut4"] <= estimate["lut4"] <= placed["lut4"]


def test_bad_device_is_refused():
    block = registry.get("fp32_cmp")
    with pytest.raises(ValueError, match="`device` must be one of"):
        synthesize(block, block.resolve({}), device="xc7a35t")


def test_ice40_counts_come_from_the_statistics(tmp_path):
    """iCE40 is synthesis only; the counts must be read from Yosys's statistics, not be zeros."""
    block = registry.get("fp32_cmp")
    result = synthesize(block, block.resolve({}), device="ice40-up5k", workdir=tmp_path)
    assert result["fmax_mhz"] is None
    assert result["lut4"] > 50 and result["ff"] > 0
