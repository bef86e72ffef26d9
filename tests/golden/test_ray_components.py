"""The golden references of the ray accelerator's components, composed stage by stage as the RTL
top level wires them (decode, ray setup, box engine, de-duplication, sort, result format, with
the triangle models), give exactly the instruction model :func:`intersect` on real encoded
instructions of every kind; and a broken stage (no de-duplication, no ray transform) is caught."""

import numpy as np
import pytest

from gpurtl.golden.ray_accel.encode.ray import node_bytes
from gpurtl.golden.ray_accel.scalar import sort, triangle
from gpurtl.golden.ray_accel.scalar.box_path import dedup_slots
from gpurtl.golden.ray_accel.scalar.box_test import box_engine
from gpurtl.golden.ray_accel.scalar.decode import decode
from gpurtl.golden.ray_accel.scalar.intersect import intersect
from gpurtl.golden.ray_accel.scalar.result import format_result
from gpurtl.golden.ray_accel.scalar.setup import ray_setup
from gpurtl.sim.blocks.ray_accel import stimulus

PATHS = frozenset({"box", "obb", "instance", "triangle", "legacy_triangle"})


def composed(instr, *, dedup=True, transform=True):
    """The instruction's result from the component references alone."""
    d = decode(instr)
    ctl = d["control"]
    setup_in = {
        "origin": d["ray"]["origin"],
        "dir": d["ray"]["dir"],
        "obb_index": d["obb_index"],
        "transform": d["transform"],
    }
    if not transform:
        setup_in = dict(setup_in, obb_index=0x7F, transform=dict(d["transform"], use_matrix=0))
    s = ray_setup(setup_in)
    e = box_engine(
        {
            "base": d["base"],
            "boxes": d["planes"],
            "inv_dir": s["inv_dir"],
            "ray": {
                "origin": s["ray"]["origin"],
                "extent": d["ray"]["extent"],
                "box_grow": ctl["box_grow"],
                "heuristic": ctl["heuristic"],
            },
        }
    )
    slots = [{"ptr": p, "hit": b["hit"], "key": b["key"]} for p, b in zip(d["ptrs"], e["boxes"])]
    dd = dedup_slots({"slots": slots, "dedup": int(dedup and not ctl["dual"])})["slots"]
    ptrs = [s_["ptr"] for s_ in dd]
    if ctl["sort_enable"]:
        ptrs = sort.sort_slots(
            ptrs, [s_["key"] for s_ in dd], ctl["sort_tri_first"], wide=bool(ctl["sort_wide"])
        )
    args = (instr["ray"], instr["pointer_flags"], instr["desc"])
    tri = {"result": [0] * 10, "error": 0}
    if ctl["is_triangle"]:
        res = triangle.triangle_pair_eval(node_bytes(instr["node"][0]), instr["node_ptr"][0], *args)
        tri = {"result": res["dwords"], "error": int(res["error"])}
    legacy = {"result": [[0] * 4, [0] * 4], "error": [0, 0]}
    for k in range(2):
        if (ctl["dual_triangle"] >> k) & 1:
            legacy["result"][k] = list(
                triangle.legacy_triangle_result(
                    node_bytes(instr["node"][k]), instr["node_ptr"][k], *args
                )
            )[:4]
    return format_result(
        {
            "ptrs": ptrs,
            "control": ctl,
            "ray": {"origin": d["ray"]["origin"], "dir": d["ray"]["dir"]},
            "instance_ray": s["ray"],
            "instance": d["instance"],
            "triangle": tri,
            "legacy": legacy,
            "geometry_index": d["geometry_index"],
        }
    )


@pytest.fixture(scope="module")
def instructions():
    return stimulus(np.random.default_rng(2024), 60)


def test_components_compose_to_the_instruction_model(instructions):
    for k, instr in enumerate(instructions):
        assert composed(instr) == intersect(instr, paths=PATHS), f"instruction {k}: {instr}"


@pytest.mark.parametrize("broken", [{"dedup": False}, {"transform": False}])
def test_a_broken_stage_is_caught(instructions, broken):
    assert any(composed(instr, **broken) != intersect(instr, paths=PATHS) for instr in instructions)
