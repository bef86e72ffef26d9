"""The RT unit on the board: ``gpurtl board ulx3s rt_unit`` builds the ``rt_unit`` block with a
small scene's BVH8 in block RAM behind its L0 (:class:`gpurtl.hdl.board.rt_unit.RtUnitBoard`),
inside the UART harness.

* :data:`SCENES` / :func:`scene_image`: the node lines of a scene (line ``k`` = bytes
  ``128 k .. 128 k + 127`` of the BVH; the root box node is line 1, pointer ``0x15``).
* :func:`board_block`: a block for :func:`gpurtl.sim.tools.board.build_ulx3s` and the CLI: a pipeline
  block's own entry, or for ``rt_unit`` its parameters plus ``scene`` and ``mem_latency`` with a
  build that puts the node memory beside the RT unit.
* :func:`expected_result`: what the board answers for one instruction (the scalar intersection
  model on the scene's node line), for tests and hosts; :func:`board_layouts` and
  :func:`expected_outputs`: the transactions of ``gpurtl board ulx3s rt_unit --port``.
"""

import dataclasses
import functools

from amaranth.lib import data

from gpurtl.golden.bvh.builder import build_bvh
from gpurtl.golden.bvh.mesh import bunny
from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel
from gpurtl.hdl.ray_accel.ray_accel import build_paths

from ..core.registry import Param

__all__ = [
    "BOARD_BLOCKS",
    "BOARD_CHANGES",
    "SCENES",
    "board_block",
    "expected_result",
    "scene_image",
]

#: Scenes the node memory can hold: name -> (description, mesh function).
SCENES = {
    "bunny": (
        "the packaged Stanford Bunny (res 4, 907 triangles, golden/bvh/mesh.py `bunny`), BVH8 "
        "without OBBs, up to 4 triangles per leaf: 386 lines (74 box nodes)",
        bunny,
    ),
}

#: Cycle blocks that have a board top: name -> the extra parameters of the board build.
BOARD_BLOCKS = {
    "rt_unit": (
        Param("scene", "bunny", "the BVH in the node memory (block RAM)", choices=tuple(SCENES)),
        Param(
            "mem_latency", 1, "node memory: cycles from a line request to its fill", range=(1, 255)
        ),
    )
}

#: Parameters of a block whose range or default differs on the board: name -> {param: changes}.
#: ``beats``: the node memory sends whole lines (:class:`~gpurtl.hdl.board.rt_unit.RtUnitBoard`
#: refuses other values). ``fp``: the block's default, ``shallow`` (one stage per FP32 core, the
#: latency the CU model's RT unit mode is checked at), leaves cones that Yosys's LUT mapping
#: did not finish in 33 CPU-minutes; ``fpga`` maps in about 3 (docs/fpga.md).
BOARD_CHANGES = {
    "rt_unit": {
        "beats": {"choices": (1,), "doc": "fill transfers per line: 1 (whole lines)"},
        "fp": {"default": "fpga"},
    }
}


@functools.lru_cache(maxsize=4)
def _scene(name):
    bvh = build_bvh(SCENES[name][1](), width=8, obb_threshold=None)
    lines = [0] * (bvh.size // 128)
    for offset, dwords in bvh.image.items():
        lines[offset // 128] = sum(int(w) << (32 * k) for k, w in enumerate(dwords))
    return bvh, tuple(lines)


def scene_image(name):
    """``(bvh, lines)``: the scene's BVH (:func:`~gpurtl.golden.bvh.builder.build_bvh`, BVH8,
    no OBBs) and its memory as a tuple of 1024-bit lines."""
    if name not in SCENES:
        raise ValueError(f"`scene` must be one of {', '.join(SCENES)}, not {name!r}")
    return _scene(name)


def expected_result(params, instruction):
    """The result (``OUT_LAYOUT`` dictionary) the board gives for ``instruction`` (a
    ``fetch_layout`` dictionary) under ``params``: the node is the scene's line
    ``(node_ptr[0] >> 4)`` mod ``2 ** line_bits`` (zero outside the scene)."""
    bvh, _ = scene_image(params["scene"])
    line = (instruction["node_ptr"][0] >> 4) % (1 << params["line_bits"])
    instr = {k: v for k, v in instruction.items() if k not in ("tag", "last")}
    instr["node"] = [[int(w) for w in bvh.image.get(128 * line, [0] * 32)], [0] * 32]
    paths = build_paths(params["triangles"], params["transforms"])
    return IntersectModel(ftz=params["ftz"], paths=paths)(instr)


def board_layouts(params):
    """``(request, response)``: the layouts of one UART transaction of the RT unit board under
    ``params``: an instruction as ``node_fetch`` takes it and the RT unit's result."""
    from gpurtl.facts.ray_accel import OUT_LAYOUT
    from gpurtl.hdl.rt_unit.node_fetch import fetch_layout

    request = fetch_layout(params["tag_bits"])
    response = data.StructLayout({"wave": params["tag_bits"], "last": 1, "result": OUT_LAYOUT})
    return request, response


def expected_outputs(params, instructions):
    """What the board answers for ``instructions`` sent one at a time (each answered before the
    next is sent): the wave, the ``last`` bit and :func:`expected_result`."""
    return [
        {"wave": i["tag"], "last": i["last"], "result": expected_result(params, i)}
        for i in instructions
    ]


def _split(params):
    # `preset` names a build whose values resolve() has already applied: no build parameter.
    extra = {p.name for p in BOARD_BLOCKS["rt_unit"]} | {"preset"}
    return (
        {k: v for k, v in params.items() if k not in extra},
        params["scene"],
        params["mem_latency"],
    )


def board_block(block):
    """The block ``gpurtl board`` builds for ``block``: itself for a pipeline block; for a cycle
    block of :data:`BOARD_BLOCKS` a copy with the board's parameters and build. Raises
    ValueError for other cycle blocks."""
    if block.kind == "pipeline":
        return block
    if block.name not in BOARD_BLOCKS:
        raise ValueError(
            f"block `{block.name}` is cycle-stepped and has no board top; the UART harness "
            f"needs a pipeline block or one of {', '.join(BOARD_BLOCKS)}"
        )
    from gpurtl.hdl.board.rt_unit import RtUnitBoard

    def build(**params):
        unit, scene, latency = _split(params)
        return RtUnitBoard(list(scene_image(scene)[1]), latency=latency, **unit)

    def validate(**params):
        unit, scene, _ = _split(params)
        block.validate(**unit)
        lines = len(scene_image(scene)[1])
        if lines > 1 << unit["line_bits"]:
            raise ValueError(
                f"`line_bits` must address the scene's {lines} lines "
                f"(at least {(lines - 1).bit_length()}), not {unit['line_bits']}"
            )

    changes = BOARD_CHANGES.get(block.name, {})
    params = tuple(dataclasses.replace(p, **changes.get(p.name, {})) for p in block.params)
    return dataclasses.replace(
        block, params=params + BOARD_BLOCKS[block.name], build=build, validate=validate
    )
