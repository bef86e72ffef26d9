"""The reference player of wave programs (golden/traversal/play.py) on the golden RT unit: every
result and stack response equal to the programs' expected words, the cycles and instruction
records equal to the CU model's RT unit mode on the same waves (which reads no ray data), and a
wrong expected word counted as a mismatch."""

import numpy as np
import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.bvh import wavefront as WF
from gpurtl.golden.cu import WaveTrace
from gpurtl.golden.cu.rt_unit import simulate_rt_unit
from gpurtl.golden.traversal import play as PL
from gpurtl.golden.traversal import streams as S
from gpurtl.golden.traversal.rays import sphere_rays
from gpurtl.golden.traversal.scene import build_scene
from gpurtl.sim.blocks.rt_unit import top_golden
from gpurtl.sim.experiments.traversal.rtl import accel_timing, cu_params, rt_unit_params


@pytest.fixture(scope="module")
def run():
    rt = rt_unit_params()
    bunny = M.bunny()
    origins, dirs = sphere_rays(bunny, 12, seed=3)
    params = cu_params(rt)
    programs = S.build(WF.Tables(build_scene("bunny", bunny, "bvh8").top), origins, dirs, params)
    return rt, params, programs


def _play(rt, params, programs):
    from gpurtl.hdl.rt_unit import fetch_layout
    from gpurtl.sim.core import layouts

    idle = layouts.unpack(fetch_layout(rt["tag_bits"]), 0)
    return PL.play(programs, params, top_golden(**rt), slots=1 << rt["tag_bits"], idle=idle)


def _waves(p):
    out = []
    for w in range(p.waves):
        its = [
            [
                (int(p.lane[e]), int(p.node_ptr[e, 0]) >> 4, int(p.lane_kind[e]),
                 int(p.box_tests[e]), int(p.tri_tests[e]))
                for e in range(p.iter_lanes[i], p.iter_lanes[i + 1])
            ]
            for i in range(p.wave_iters[w], p.wave_iters[w + 1])
        ]  # fmt: skip
        out.append(WaveTrace(its, [], tag=w))
    return out


@pytest.mark.full  # about 4 s: the golden RT unit a cycle at a time, twice
def test_the_golden_rt_unit_plays_the_programs(run):
    rt, params, programs = run
    played = _play(rt, params, programs)
    assert played.mismatches == 0
    assert played.results == played.stack_checked == programs.entries
    ii, latency = accel_timing(rt)
    exact = simulate_rt_unit(
        _waves(programs), params, rt, warm_lines=list(programs.lines),
        accel_groups=ii, accel_depth=latency - ii,
    )  # fmt: skip
    assert played.run.cycles == exact.cycles > 0
    assert played.run.instructions == exact.instructions
    assert len(played.run.instructions) == 2 * programs.iterations


@pytest.mark.full
def test_a_wrong_expected_word_is_a_mismatch(run):
    rt, params, programs = run
    wrong = programs.with_valu(params)
    wrong.result_dw = programs.result_dw.copy()
    wrong.result_dw[5, 0] ^= 1
    wrong.stack_dst = programs.stack_dst.copy()
    wrong.stack_dst[7, 0] ^= 0x10
    played = _play(rt, params, wrong)
    assert played.mismatches == 2
    fields = {m[3] for m in played.first_mismatches}
    assert fields == {"dw", "stack_dst"}


def test_unpack_desc_inverts_pack_desc():
    from gpurtl.golden.ray_accel.encode.ray import default_desc
    from gpurtl.golden.traversal.program import pack_desc

    desc = default_desc(box_grow=9, heuristic=2)
    assert PL.unpack_desc(pack_desc(desc)) == desc
    assert np.uint32(pack_desc(desc)) == pack_desc(desc)
