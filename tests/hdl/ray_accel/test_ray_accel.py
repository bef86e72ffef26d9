"""Ray accelerator top level (block ``ray_accel``): lockstep against the golden intersect model on
real encoded nodes (BVH8 boxes, OBB boxes, instances, triangle pairs, dual legacy nodes, corner
cases), throughput (one instruction per cycle: the first half of each run is stall-free and must
be accepted every cycle and emitted exactly ``latency`` cycles later), random stalls, a smaller
build (II = 2, ftz), the ``ray_sort`` block (sort unit alone), and the top level on Verilator:
the smallest build in the default run, the box-path and full builds as slow tests (the full
build's export and C++ compile take about 25 minutes on a 2-core machine).

The Python simulator runs this design at roughly 5-10 cycles/s after 30-90 s of elaboration, so
the pysim counts are modest; the Verilator test carries the volume."""

import pytest

from gpurtl.hdl.ray_accel.ray_accel import RayAccel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

from .drive import run_lockstep

BLOCK = registry.get("ray_accel")


# The full tier only: the 2 x 4 box build costs tens of CPU-seconds of elaboration on pysim;
# `ray_accel` itself stays in `make test` in the registry's lockstep run.
@pytest.mark.full
@pytest.mark.parametrize("count", [8, 40])
def test_box_build_lockstep_throughput_and_stalls(count):
    """Box paths only (2 engines x 4 boxes): one instruction per cycle, N in N - 1 + latency."""
    dut = run_lockstep("ray_accel", {"triangles": "0", "transforms": "0"}, count, seed=11)
    assert dut.initiation_interval == 1


@pytest.mark.slow
def test_small_build_ii2_ftz():
    """1 engine x 4 boxes: 2 cycles per instruction; subnormals flushed in the box arithmetic."""
    dut = run_lockstep(
        "ray_accel",
        {"engines": "1", "boxes_per_engine": "4", "ftz": "1", "triangles": "0", "transforms": "0"},
        16,
        seed=12,
    )
    assert dut.initiation_interval == 2


@pytest.mark.slow
def test_full_build_lockstep_pysim():
    """Every path (triangle pairs, legacy triangles, OBB, instances) in the Python simulator."""
    run_lockstep("ray_accel", {}, 40, seed=13)


@pytest.mark.slow
def test_full_build_shallow_preset():
    """Every path with one register per FP32 core (``fp=shallow``), random stalls."""
    dut = run_lockstep("ray_accel", {"fp": "shallow"}, 30, seed=14)
    assert dut.box_latency <= 24


@pytest.mark.slow
def test_slot_groups_with_transforms():
    """4 slot groups (1 engine x 2 boxes, II 4) with the OBB and instance transforms."""
    dut = run_lockstep(
        "ray_accel", {"engines": "1", "boxes_per_engine": "2", "triangles": "0"}, 16, seed=15
    )
    assert dut.initiation_interval == 4


def test_bad_parameters():
    with pytest.raises(ValueError, match="engines"):
        RayAccel(engines=3)
    with pytest.raises(ValueError, match="1, 2, 4 or 8"):
        RayAccel(engines=2, boxes_per_engine=3)
    with pytest.raises(TypeError, match="ftz"):
        RayAccel(ftz=1)


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_lockstep_verilator_smallest_build():
    """The exported Verilog of the smallest build (1 engine x 1 box test, II 8) under cocotb on
    Verilator against the golden model: decode, reciprocal, box test, de-duplication and sort,
    with random stalls (about two minutes; the full build's run is the slow test below)."""
    params = BLOCK.resolve(
        {"engines": "1", "boxes_per_engine": "1", "triangles": "0", "transforms": "0"}
    )
    report = BACKENDS["verilator"].check(BLOCK, params, count=120, seed=23)
    assert report.failed == 0, str(report.first)
    assert report.passed == 120


@pytest.mark.slow
@pytest.mark.verilator
def test_lockstep_verilator_box_build():
    """The box paths (BVH8, dual legacy boxes, corner cases) with volume, on Verilator (the
    Verilog export alone takes ~8 minutes on a loaded 2-core machine, hence slow)."""
    params = BLOCK.resolve({"triangles": "0", "transforms": "0"})
    report = BACKENDS["verilator"].check(BLOCK, params, count=600, seed=21)
    assert report.failed == 0, str(report.first)
    assert report.passed == 600


@pytest.mark.slow
@pytest.mark.verilator
def test_lockstep_verilator_full_build():
    """Every path on Verilator (the export and compile of the full design take many minutes)."""
    params = BLOCK.resolve({})
    report = BACKENDS["verilator"].check(BLOCK, params, count=1000, seed=22)
    assert report.failed == 0, str(report.first)
    assert report.passed == 1000


@pytest.mark.parametrize("ftz, fp", [("0", "fpga"), ("1", "fpga"), ("0", "shallow")])
def test_ray_sort_block_lockstep(ftz, fp):
    block = registry.get("ray_sort")
    report = BACKENDS["pysim"].check(
        block, block.resolve({"ftz": ftz, "fp": fp}), count=300, seed=4
    )
    assert report.failed == 0, str(report.first)
    assert report.latency_errors == 0


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_ray_sort_verilator():
    """The default run's one Verilator build: the sort unit (the top level is too big, see the
    slow tests above)."""
    block = registry.get("ray_sort")
    report = BACKENDS["verilator"].check(block, block.resolve({}), count=2000, seed=5)
    assert report.failed == 0, str(report.first)
