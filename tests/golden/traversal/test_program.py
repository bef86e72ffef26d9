"""Wave programs (:mod:`gpurtl.golden.traversal.program`): recorded from the per-wave loop they
give its traversal (closest hits and counts of ``trace_wave``), the golden RT unit fetching the
recorded node lines computes the recorded results, a wrong expected word is named where it is,
and the arrays survive a file and refuse offsets that do not fit."""

import functools

import numpy as np
import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.cu.rt_unit import HierarchyPort, run
from gpurtl.golden.traversal.loop import trace_wave
from gpurtl.golden.traversal.program import ProgramSource, WavePrograms, from_loop
from gpurtl.golden.traversal.rays import sphere_rays
from gpurtl.golden.traversal.scene import build_scene
from gpurtl.sim.blocks.rt_unit import top_golden
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.experiments.traversal.rtl import cu_params, rt_unit_params


@functools.cache
def _recorded(rays=8, wave_rays=4):
    bunny = M.bunny()
    scene = build_scene("bunny", bunny, "bvh8")
    origins, dirs = sphere_rays(bunny, rays, seed=3)
    rt = rt_unit_params()
    params = cu_params(rt)
    programs = from_loop(scene, origins, dirs, params, wave_rays=wave_rays)
    return scene, origins, dirs, programs, rt, params


def _golden_run(programs, rt, params):
    lines = {
        int(line): sum(int(w) << (32 * k) for k, w in enumerate(words))
        for line, words in zip(programs.lines, programs.line_words)
    }
    memory = HierarchyPort(
        params.levels[1:],
        make_line=lambda line: lines.get(line, 0),
        warm=[int(x) for x in programs.lines],
        beats=rt["beats"],
    )
    idle = layouts.unpack(registry.get("rt_unit").layouts(**rt)[0], 0)["inst"]["payload"]
    sources = [ProgramSource(programs, w) for w in range(programs.waves)]
    return run(sources, params, top_golden(**rt), memory, slots=1 << rt["tag_bits"], idle=idle)


def test_programs_are_the_loops_traversal():
    scene, origins, dirs, programs, _, params = _recorded()
    assert programs.waves == 2 and list(programs.wave_rays) == [0, 4]
    for w, trace in enumerate(programs.traces):
        golden = trace_wave(scene, origins[4 * w : 4 * w + 4], dirs[4 * w : 4 * w + 4])
        assert np.array_equal(trace.prim, golden.prim) and np.array_equal(trace.t, golden.t)
        steps = int(programs.wave_iters[w + 1] - programs.wave_iters[w])
        assert steps == len(golden.active)
        first = int(programs.iter_lanes[programs.wave_iters[w]])
        last = int(programs.iter_lanes[programs.wave_iters[w + 1]])
        assert last - first == int(golden.counts["steps"].sum())
    assert programs.iter_valu[0] == params.box_valu  # the root: a box node
    assert (programs.wave_setup_valu == params.setup_cycles).all()


def test_the_golden_rt_unit_computes_the_recorded_results():
    _, _, _, programs, rt, params = _recorded()
    out = _golden_run(programs, rt, params)  # raises at a result that differs
    assert out.results == programs.entries
    assert len(out.instructions) == 2 * programs.iterations


def test_a_wrong_expected_word_is_named():
    _, _, _, programs, rt, params = _recorded()
    bad = WavePrograms(**{k: getattr(programs, k) for k in programs.__dataclass_fields__})
    bad.result_dw = programs.result_dw.copy()
    entry = int(programs.iter_lanes[programs.wave_iters[1] + 1])
    bad.result_dw[entry, 2] ^= 4
    lane = int(programs.lane[entry])
    with pytest.raises(ValueError, match=f"wave 1 iteration 1 lane {lane}: `dw`"):
        _golden_run(bad, rt, params)


def test_programs_survive_a_file_and_refuse_bad_offsets(tmp_path):
    _, _, _, programs, _, _ = _recorded()
    programs.save(tmp_path / "p.npz")
    again = WavePrograms.load(tmp_path / "p.npz")
    again.check()
    for name in programs.__dataclass_fields__:
        assert np.array_equal(getattr(again, name), getattr(programs, name)), name
    again.iter_lanes = again.iter_lanes.copy()
    again.iter_lanes[-1] += 1
    with pytest.raises(ValueError, match="iter_lanes"):
        again.check()
