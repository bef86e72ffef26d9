"""The golden references of the ray accelerator's components, chained stage by stage as the RTL
top level wires them (:mod:`gpurtl.golden.ray_accel.chain`), give exactly the instruction model
:func:`intersect` on real encoded instructions of every kind, for the full build, the build
without triangle and transform paths, and with ``ftz``; and a broken stage (no de-duplication,
no ray transform) is caught. The node kinds of a build are the RTL top level's
(:func:`~gpurtl.hdl.ray_accel.ray_accel.build_paths`)."""

import numpy as np
import pytest

from gpurtl.golden.ray_accel.chain import STAGES, intersect_chain
from gpurtl.golden.ray_accel.scalar.box_path import dedup_slots
from gpurtl.golden.ray_accel.scalar.intersect import intersect
from gpurtl.golden.ray_accel.scalar.setup import ray_setup
from gpurtl.hdl.ray_accel.ray_accel import build_paths
from gpurtl.sim.blocks.ray_accel import stimulus

ALL_PATHS = frozenset({"box", "obb", "instance", "triangle", "legacy_triangle"})


@pytest.fixture(scope="module")
def instructions():
    return stimulus(np.random.default_rng(2024), 60)


@pytest.mark.parametrize(
    "build",
    [
        {},
        {"triangles": False, "transforms": False},
        {"triangles": True, "transforms": False},
        {"ftz": True},
    ],
)
def test_components_chain_to_the_instruction_model(instructions, build):
    paths = build_paths(build.get("triangles", True), build.get("transforms", True))
    ftz = build.get("ftz", False)
    for k, instr in enumerate(instructions):
        assert intersect_chain(instr, **build) == intersect(instr, ftz=ftz, paths=paths), (
            f"instruction {k}: {instr}"
        )


def _no_dedup(tx):
    return dedup_slots(dict(tx, dedup=0))


def _no_transform(tx):
    return ray_setup(dict(tx, obb_index=0x7F, transform=dict(tx["transform"], use_matrix=0)))


@pytest.mark.parametrize("broken", [{"dedup": _no_dedup}, {"ray_setup": _no_transform}])
def test_a_broken_stage_is_caught(instructions, broken):
    assert any(
        intersect_chain(instr, stages=broken) != intersect(instr, paths=ALL_PATHS)
        for instr in instructions
    )


def test_an_unknown_stage_is_refused(instructions):
    with pytest.raises(ValueError, match="`stages` keys must be among decode"):
        intersect_chain(instructions[0], stages={"dedupe": _no_dedup})
    assert "dedup" in STAGES
