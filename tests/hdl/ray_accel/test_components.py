"""The ray accelerator's components alone, each in lockstep with its own golden reference under
random stalls (blocks ``ray_decode``, ``ray_setup``, ``ray_box_engine``, ``ray_dedup``,
``ray_result``), and the top level's latency read from its components."""

import pytest

from gpurtl.hdl.ray_accel.ray_accel import RayAccel

from .drive import run_lockstep


@pytest.mark.parametrize(
    "name, overrides, count",
    [
        ("ray_decode", {}, 40),
        ("ray_decode", {"triangles": "0", "transforms": "0"}, 20),
        ("ray_setup", {"fp": "shallow"}, 6),
        pytest.param("ray_setup", {"fp": "shallow"}, 16, marks=pytest.mark.full),
        ("ray_box_engine", {"fp": "shallow", "boxes": "2"}, 8),
        pytest.param("ray_box_engine", {"fp": "shallow", "boxes": "2"}, 20, marks=pytest.mark.full),
        ("ray_box_engine", {"boxes": "1"}, 24),  # fpga preset: c3 split over three cycles
        ("ray_dedup", {}, 200),
        ("ray_result", {}, 100),
        ("ray_result", {"triangles": "0", "transforms": "0"}, 50),
    ],
)
def test_component_lockstep(name, overrides, count):
    run_lockstep(name, overrides, count, seed=21)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, overrides",
    [
        ("ray_setup", {}),
        ("ray_setup", {"transforms": "0", "ftz": "1"}),
        ("ray_box_engine", {"boxes": "4"}),
        ("ray_box_engine", {"boxes": "1", "ftz": "1"}),
    ],
)
def test_component_lockstep_fpga_depths(name, overrides):
    run_lockstep(name, overrides, 60, seed=22)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"triangles": False, "transforms": False},
        {"fp": "shallow"},
        {"engines": 1, "boxes_per_engine": 1, "triangles": False, "transforms": False},
    ],
)
def test_latency_is_the_sum_of_the_components(params):
    dut = RayAccel(**params)
    setup, eng = dut._setup, dut._box_engines[0]
    plane_wait = max(setup.transform_latency, setup.latency - eng.inv_offset)
    box = (
        dut._decode.latency
        + dut.initiation_interval
        - 1
        + plane_wait
        + eng.latency
        + dut._dedup.latency
        + dut._sorter.latency
        + dut._format.latency
    )
    paths = [box]
    if dut._tri is not None:
        paths += [dut._tri.latency + 1, dut._leg.latency + 1]
    assert dut.latency == max(paths)
    assert dut.box_latency == box


def test_shallow_preset_box_path_within_24_cycles():
    assert RayAccel(fp="shallow").box_latency <= 24
    assert RayAccel(fp="shallow", triangles=False, transforms=False).latency <= 24


def test_bad_preset():
    with pytest.raises(ValueError, match="`fp` must be one of 'fpga', 'shallow', not 'deep'"):
        RayAccel(fp="deep")


def test_list_shows_a_build_of_one_block(capsys):
    """`gpurtl list ray_accel -p fp=shallow`: the latency, the box path and the register bits of
    that build; `-p` without a block is a usage error (exit status 2, one line)."""
    from gpurtl.sim.tools.cli import main

    assert main(["list", "ray_accel", "-p", "fp=shallow", "-p", "triangles=0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ray_accel  (pipeline, latency ")
    box = int(out.split("box_path_latency: ")[1].split()[0])
    assert box <= 24
    assert "register_bits: s1 " in out
    assert main(["list", "-p", "fp=shallow"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "BLOCK" in err
