"""The compiled RT-unit player (:mod:`gpurtl.sim.backends.fast.player`): its timing equals the CU
model's RT unit mode on the golden RT unit (:func:`gpurtl.golden.cu.rt_unit.run`) instruction for
instruction, its 64-ray run is the session loop's (20546 cycles and the L0 and refusal counts of
``gpurtl experiment traversal --rtl --rtl-backend verilator``'s summary, RDNA 4's levels below the
L0), and a wrong expected word is a
mismatch that names its wave, iteration, lane and field."""

import functools

import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.golden.cu.rt_unit import HierarchyPort, run
from gpurtl.golden.traversal.program import ProgramSource, from_loop
from gpurtl.golden.traversal.rays import sphere_rays
from gpurtl.golden.traversal.scene import build_scene
from gpurtl.sim.backends.fast import player
from gpurtl.sim.blocks.rt_unit import top_golden
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.experiments.traversal.rtl import cu_params, rt_unit_params


@functools.cache
def _scene():
    bunny = M.bunny()
    return bunny, build_scene("bunny", bunny, "bvh8")


def _programs(rays, wave_rays=32):
    bunny, scene = _scene()
    origins, dirs = sphere_rays(bunny, rays, seed=3)
    rt = rt_unit_params()
    params = cu_params(rt)
    return from_loop(scene, origins, dirs, params, wave_rays=wave_rays), rt, params


def _golden_run(programs, rt, params):
    """:func:`gpurtl.golden.cu.rt_unit.run` of the programs on the golden RT unit."""
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


def test_layouts_are_those_of_the_built_unit():
    rt = rt_unit_params()
    stack = registry.get("ds_bvh_stack").resolve({"stack_size": 16, "waves": 4, "lanes": 32})
    params = {f"rt_{k}": v for k, v in rt.items()}
    params.update({f"ds_{k}": v for k, v in stack.items()})
    unit = player.player_block().build(**params)
    assert player.player_block().layouts(**params) == (unit.i.shape(), unit.o.shape())


@pytest.mark.verilator
def test_player_timing_equals_the_cu_model_on_the_golden_rt_unit():
    # six short waves on four slots: slots take the next wave when theirs ends
    programs, rt, params = _programs(24, wave_rays=4)
    assert programs.waves == 6
    got = player.run_player(programs, rt, params)
    want = _golden_run(programs, rt, params)
    assert got.mismatches == 0
    assert got.instructions == want.instructions
    assert got.cycles == want.cycles
    assert got.lookups == want.lookups
    assert got.refused == want.refused
    assert (got.busy, got.results) == (want.busy, want.results)
    assert got.stack_checked == programs.entries
    # every slot ran a wave, and two waves ran in a slot another had left
    assert sorted(set(got.waves[:, 0].tolist())) == [0, 1, 2, 3]


@pytest.mark.verilator
def test_player_on_the_64_rays_gives_the_session_loops_timing():
    programs, rt, params = _programs(64)
    got = player.run_player(programs, rt, params)
    assert got.mismatches == 0
    # the session loop's (docs/rt_unit.md, "The compiled player")
    assert got.cycles == 20546
    assert got.lookups == {"hit": 182, "pending_hit": 23, "miss": 459}
    assert got.refused == {"full": 0, "other": 15602}
    assert got.busy == 19058
    assert got.results == got.stack_checked == programs.entries == 664
    assert len(got.instructions) == 2 * programs.iterations == 92


@pytest.mark.verilator
def test_a_wrong_expected_word_is_a_mismatch_naming_where():
    programs, rt, params = _programs(8, wave_rays=4)
    entry = int(programs.iter_lanes[programs.wave_iters[1] + 2])  # wave 1, iteration 2
    lane = int(programs.lane[entry])
    programs.result_dw[entry, 3] ^= 1
    stack_entry = int(programs.iter_lanes[1])  # wave 0, iteration 1
    programs.stack_dst[stack_entry, 0] ^= 0x10
    got = player.run_player(programs, rt, params)
    assert got.mismatches == 2
    where = {(m["wave"], m["iteration"], m["lane"], m["field"]) for m in got.first_mismatches}
    assert where == {(1, 2, lane, "dw[3]"), (0, 1, int(programs.lane[stack_entry]), "dst0")}
