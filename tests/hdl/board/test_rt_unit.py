"""The RT unit with the bunny's BVH8 in its node memory (the board top without the UART), on
the Amaranth simulator: instructions in, results out; each result equals the scalar intersection
model on the node line the scene's builder wrote (independent of the node memory's RTL)."""

from amaranth.sim import Simulator

from gpurtl.facts.ray_accel import OUT_LAYOUT
from gpurtl.golden.ray_accel.encode.ray import default_desc, make_ray
from gpurtl.hdl.board.rt_unit import RtUnitBoard
from gpurtl.hdl.rt_unit import fetch_layout
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.tools.board_rt import board_block, expected_result, scene_image

SMALL = {
    "size": 512,
    "ways": 2,
    "mshrs": 2,
    "targets": 2,
    "id_bits": 2,
    "line_bits": 9,
    "tag_bits": 1,
    "mem_latency": 3,
}


def _instructions(params, bvh):
    ray = make_ray((-0.3, 0.1, 0.0), (1.0, 0.02, 0.01))
    leaf = next(c for box in bvh.boxes for c in box.children if c.kind != "box")

    def inst(wave, ptr):
        return {
            "tag": wave,
            "last": 1,  # one lane per wave instruction: each is its own instruction on bvhcnt
            "dual": 0,
            "ray": ray,
            "node_ptr": [ptr, 0],
            "pointer_flags": 0,
            "desc": default_desc(),
        }

    root = inst(0, bvh.boxes[0].ptr)
    child = expected_result(params, root)["dw"][0]  # the nearest box child the ray enters
    assert child & 7 == 5 and child != 0x15
    return [
        root,  # the root (0x15): a miss
        inst(1, child),  # the next traversal step
        inst(0, bvh.boxes[0].ptr),  # the root again: a hit
        inst(1, (500 << 4) | 5),  # a line outside the scene: a zero node, err.range
        inst(0, leaf.ptr),  # a triangle node (no triangle path in this build)
    ]


def test_results_are_the_scene_nodes_intersections():
    params = board_block(registry.get("rt_unit")).resolve(SMALL)
    bvh, lines = scene_image(params["scene"])
    assert bvh.boxes[0].ptr == 0x15 and lines[1] != 0 and lines[0] == 0
    dut = board_block(registry.get("rt_unit")).build(**params)
    assert isinstance(dut, RtUnitBoard)
    shape = fetch_layout(params["tag_bits"])
    todo = _instructions(params, bvh)
    results, errors = [], []

    async def testbench(ctx):
        queue = list(todo)
        ctx.set(dut.o.ready, 1)
        for _ in range(500):
            if queue:
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload.as_value(), layouts.pack(shape, queue[0]))
            else:
                ctx.set(dut.i.valid, 0)
            taken = queue and ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                results.append(
                    (
                        ctx.get(dut.o.payload.wave),
                        layouts.unpack(OUT_LAYOUT, ctx.get(dut.o.payload.result.as_value())),
                    )
                )
            errors.append(ctx.get(dut.err.range))
            await ctx.tick()
            if taken:
                queue.pop(0)
            if len(results) == len(todo):
                break

    sim = Simulator(dut)
    sim.add_clock(1 / 25e6)
    sim.add_testbench(testbench)
    sim.run()
    assert len(results) == len(todo)
    for wave in (0, 1):
        got = [result for w, result in results if w == wave]
        want = [expected_result(params, i) for i in todo if i["tag"] == wave]
        assert got == want, wave
    assert sum(errors) == 1
    # the ray enters the root's and the child's boxes: both results name children
    for k in (0, 1):
        assert expected_result(params, todo[k])["dw"][0] != 0xFFFFFFFF
