"""The per-wave loop (golden/traversal/loop.py): the one traversal loop on one wave with scalar
executors, its driver protocol (``wave_program``) and its trace (``trace_wave``)."""

import json

import numpy as np
import pytest

from gpurtl.facts.ray_accel import TERMINAL_NODE
from gpurtl.golden.bvh import builder as B
from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.ray_accel.vector.intersect_wave import intersect_wave
from gpurtl.golden.traversal import loop as L
from gpurtl.golden.traversal import stack as S
from gpurtl.golden.traversal.rays import sphere_rays


@pytest.fixture(scope="module")
def bunny():
    return M.bunny()


def _scene(mesh, mode):
    width = 8 if mode == "bvh8" else 4
    return L.Scene("t", B.build_bvh(mesh, width=width, obb_threshold=None), mode)


@pytest.mark.parametrize("mode", L.MODES)
def test_the_trace_counts_what_the_driver_saw(bunny, mode):
    """A driver that keeps every message: the lanes are plain ints and the instructions plain
    JSON (what an RTL session packs), and the trace's per-iteration records add up to what went
    through the driver."""
    scene = _scene(bunny, mode)
    origins, dirs = sphere_rays(bunny, 32, seed=8)
    seen = {"intersect": [], "stack": []}
    stack_size = 4
    ref = L.trace_wave(
        scene,
        origins,
        dirs,
        stack_size=stack_size,
        record=lambda i, o: seen["intersect"].append(i),
        stack_record=lambda q, a: seen["stack"].append((q, a)),
    )
    lds = S.LdsMemory(32 * stack_size)
    program = L.wave_program(scene, origins, dirs, stack_size=stack_size)
    message, lanes_seen = next(program), []
    while True:
        kind, lanes, items = message
        assert all(type(lane) is int for lane in lanes) and len(lanes) == len(items)
        json.dumps(items)
        lanes_seen.append(len(lanes))
        if kind == "intersect":
            answers = intersect_wave(items)
        else:
            answers = L.stack_answers(items, lds, stack_size)
        try:
            message = program.send(answers)
        except StopIteration as stop:
            tr = stop.value
            break
    assert np.array_equal(tr.prim, ref.prim) and np.array_equal(tr.t, ref.t)
    assert sum(lanes_seen[0::2]) == len(seen["intersect"]) == ref.counts["steps"].sum()
    assert sum(lanes_seen[1::2]) == len(seen["stack"]) == ref.counts["stack_ops"].sum()
    assert tr.active == lanes_seen[0::2] and len(tr.lines) == len(tr.active)
    assert [len(x) for x in tr.lines] == tr.active
    assert sum(len(lane) for it in tr.lines for lane in it) == ref.counts["fetches"].sum()
    assert sum(tr.stack_dwords) == ref.counts["pushes"].sum() + ref.counts["pops"].sum()
    assert sum(tr.walkbacks) == ref.counts["walkback_steps"].sum() > 0
    assert ref.counts["overflows"].sum() > 0
    if mode == "bvh4x2":
        assert 0 < tr.dual_live < tr.dual_slots == ref.counts["steps"].sum()


def test_every_decision_comes_from_the_driver(bunny):
    """A driver whose stack answers end every lane: one iteration, whatever the scene holds;
    the stack registers start at the given LDS bases."""
    scene = _scene(bunny, "bvh8")
    origins, dirs = sphere_rays(bunny, 32, seed=8)
    bases = [100 + 7 * k for k in range(32)]
    program = L.wave_program(scene, origins, dirs, bases=bases)
    kind, lanes, instrs = next(program)
    assert kind == "intersect" and lanes == list(range(32))
    kind, lanes, requests = program.send(intersect_wave(instrs))
    assert kind == "stack"
    assert [S.unpack_stack_addr(q["stack_addr"])["base"] for q in requests] == bases
    with pytest.raises(StopIteration) as stop:
        program.send([(q["stack_addr"], TERMINAL_NODE) for q in requests])
    tr = stop.value.value
    assert tr.active == [32] and (tr.counts["steps"] == 1).all()
    assert (tr.counts["stack_ops"] == 1).all()
