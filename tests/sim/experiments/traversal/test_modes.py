"""BVH8 against BVH4x2 on the RT unit RTL (``gpurtl experiment traversal --rtl --rtl-modes``):
the legacy scene's node lines as the node fetch reads them, and both modes through the RTL."""

import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.rt_unit.node_fetch import dual_node
from gpurtl.golden.traversal.scene import build_scene
from gpurtl.sim.experiments.traversal import modes
from gpurtl.sim.experiments.traversal import rtl as R


def test_every_legacy_node_comes_out_of_its_line_as_the_loop_reads_it():
    """The memory image of the BVH4 scene, cut by the dual node fetch's rules, gives every node
    pointer of the scene the dwords the golden loop hands the accelerator."""
    scene = build_scene("bunny", M.bunny(), "bvh4x2")
    lines = R.node_memory(scene)
    bvh = scene.bvhs[0]
    pointers = [bvh.boxes[0].ptr] + [c.ptr for box in bvh.boxes for c in box.children]
    pointers += [p & ~7 for p in pointers if p & 7 == 1]  # triangle 0 of a paired node
    kinds = {p & 7 for p in pointers}
    assert {0, 5} <= kinds and any(p & 8 for p in pointers if p & 7 <= 1)
    for ptr in pointers:
        assert dual_node(lines[ptr >> 4], ptr) == scene.node(0, ptr), hex(ptr)


def test_bvh8_node_memory_is_whole_lines():
    scene = build_scene("bunny", M.bunny(), "bvh8")
    lines = R.node_memory(scene)
    for offset, dwords in scene.bvhs[0].image.items():
        words = list(dwords) + [0] * (32 - len(dwords))
        assert lines[offset // 128] == sum(int(w) << (32 * k) for k, w in enumerate(words))


# The dual RT unit as a cocotb model is minutes of Verilator build; the dual node fetch runs on
# Verilator in the Verilator tier (tests/hdl/rt_unit/test_node_fetch.py).
@pytest.mark.slow
@pytest.mark.verilator
def test_both_modes_on_verilator(tmp_path):
    """A wave of 8 rays in each mode through the dual build, checked against the golden
    traversal of its mode."""
    data = modes.measure(8, "verilator", {})
    a, b = data["modes"]["bvh8"], data["modes"]["bvh4x2"]
    assert a["hits"] == b["hits"] > 0
    # BVH4x2: more than one L0 lookup a lane instruction (two node lines), BVH8 exactly one
    assert a["lookups_per_lane_instruction"] == 1.0 < b["lookups_per_lane_instruction"]
    report = modes.report(data, tmp_path)
    assert "BVH4x2" in (tmp_path / "summary.md").read_text() and report["rows"]


def test_rtl_modes_needs_rtl(tmp_path, capsys):
    from gpurtl.sim.tools import cli

    status = cli.main(["experiment", "traversal", "--rtl-modes", "--out", str(tmp_path)])
    assert status == 2
    assert "--rtl-modes is an option of --rtl: give --rtl too" in capsys.readouterr().err
    assert not (tmp_path / "traversal").exists()
