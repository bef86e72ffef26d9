"""``gpurtl board ulx3s rt_unit``: the board block's parameters, the scene image, the refusals,
and the bitstream of the smallest build (slow)."""

import json
import os
import pty
import threading

import pytest
from amaranth.hdl import Shape

from gpurtl.golden.ray_accel.encode.ray import default_desc, make_ray
from gpurtl.sim.core import registry
from gpurtl.sim.tools.board_rt import (
    board_block,
    board_layouts,
    expected_outputs,
    expected_result,
    scene_image,
)
from gpurtl.sim.tools.cli import main

from .pty_board import serve

#: The smallest RT unit build on the board (docs/fpga.md).
SMALLEST = [
    "-p", "size=512", "-p", "ways=2", "-p", "mshrs=2", "-p", "targets=2",
    "-p", "id_bits=2", "-p", "line_bits=9", "-p", "tag_bits=1",
]  # fmt: skip


def test_scene_image_is_the_bvh_memory():
    bvh, lines = scene_image("bunny")
    assert len(lines) == bvh.size // 128 == 386
    assert lines[0] == 0  # the header line; the root box node is line 1 (pointer 0x15)
    for offset, dwords in bvh.image.items():
        assert [(lines[offset // 128] >> (32 * k)) & 0xFFFFFFFF for k in range(32)] == [
            int(w) for w in dwords
        ]
    with pytest.raises(ValueError, match="`scene` must be one of bunny, not 'x'"):
        scene_image("x")


def test_board_block_adds_the_node_memory_parameters():
    block = board_block(registry.get("rt_unit"))
    params = block.resolve({"mem_latency": "4"})
    assert params["scene"] == "bunny" and params["mem_latency"] == 4
    assert params["size"] == registry.get("rt_unit").resolve()["size"]
    # the board's own defaults and ranges; the block's stay as they are
    assert params["fp"] == "fpga" and registry.get("rt_unit").resolve()["fp"] == "shallow"
    assert (
        block.param("beats").choices == (1,)
        and len(registry.get("rt_unit").param("beats").choices) > 1
    )
    assert board_block(registry.get("fp32_add")) is registry.get("fp32_add")
    with pytest.raises(ValueError, match="has no board top"):
        board_block(registry.get("l0_cache"))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["rt_unit", "-p", "line_bits=8"], "must address the scene's 386 lines (at least 9)"),
        (["rt_unit", "-p", "beats=2"], "parameter `beats` must be one of 1, not 2"),
        (["rt_unit", "-p", "scene=cube"], "parameter `scene` must be"),
        (["rt_unit", "-p", "mem_latency=0"], "parameter `mem_latency` must be"),
        (["l0_cache"], "is cycle-stepped and has no board top"),
        (["rt_unit", "--port", "/dev/null"], "--port needs --input"),
    ],
)
def test_board_refuses_bad_rt_unit_options_in_one_line(tmp_path, capsys, argv, message):
    output = tmp_path / "x.bit"
    assert main(["board", "ulx3s", *argv, "-o", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not output.exists()


@pytest.mark.slow  # Yosys and nextpnr on the whole RT unit: about 36 CPU-min (docs/fpga.md)
def test_smallest_rt_unit_bitstream(tmp_path, capsys):
    output = tmp_path / "rt.bit"
    code = main(["board", "ulx3s", "rt_unit", *SMALLEST, "-o", str(output)])
    out, err = capsys.readouterr()
    assert code == 0, err  # measured at 30.66 MHz against the board's 25 (docs/fpga.md)
    assert "LUT4" in out and "BRAM" in out
    head = output.read_bytes()[:256]
    assert b"Part: LFE5U-85F-6CABGA381" in head and b"\xff\xff\xbd\xb3" in head


def test_board_layouts_are_the_board_tops_streams():
    block = board_block(registry.get("rt_unit"))
    params = block.resolve({"tag_bits": "1", "line_bits": "9", "size": "512", "ways": "2"})
    top = block.build(**params)
    top._MustUse__silence = True  # built for its signature only
    request, response = board_layouts(params)
    assert Shape.cast(request) == Shape.cast(top.i.payload.shape())
    assert Shape.cast(response) == Shape.cast(top.o.payload.shape())
    assert Shape.cast(request).width == 327 and Shape.cast(response).width == 516


def _fake_rt_board(master, params, wrong):
    """Play the programmed RT unit board: answer the scalar intersection model on the scene's
    node, with answer ``wrong`` altered."""

    def answer(index, inst):
        output = expected_outputs(params, [inst])[0]
        if index == wrong:
            output["result"]["dw"][0] ^= 1
        return output

    serve(master, *board_layouts(params), answer)


@pytest.mark.parametrize("wrong", [None, 1])
def test_port_sends_instructions_and_compares_with_the_scene(tmp_path, capsys, wrong):
    block = board_block(registry.get("rt_unit"))
    params = block.resolve({"tag_bits": "1", "line_bits": "9"})
    bvh, _ = scene_image("bunny")
    ray = make_ray((-0.3, 0.1, 0.0), (1.0, 0.02, 0.01))
    root = {"tag": 0, "last": 1, "dual": 0, "ray": ray, "node_ptr": [0x15, 0]}
    root.update(pointer_flags=0, desc=default_desc())
    child = expected_result(params, root)["dw"][0]
    assert child & 7 == 5  # the root's nearest box child: the second step of a traversal
    source = tmp_path / "in.jsonl"
    text = {  # FP32 fields as bit patterns in hex, as a user writes them; missing fields are 0
        "origin": [f"0x{x:08x}" for x in ray["origin"]],
        "dir": [f"0x{x:08x}" for x in ray["dir"]],
        "extent": f"0x{ray['extent']:08x}",
        "instance_mask": ray["instance_mask"],
    }
    lines = [
        {"tag": 0, "last": 1, "ray": text, "node_ptr": [0x15, 0], "desc": default_desc()},
        {"tag": 1, "last": 1, "ray": text, "node_ptr": [child, 0], "desc": default_desc()},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    master, slave = pty.openpty()
    threading.Thread(target=_fake_rt_board, args=(master, params, wrong), daemon=True).start()
    try:
        code = main(
            ["board", "ulx3s", "rt_unit", "-p", "tag_bits=1", "-p", "line_bits=9"]
            + ["--port", os.ttyname(slave), "--input", str(source)]
            + ["--results", str(tmp_path / "out.jsonl")]
        )
    finally:
        os.close(slave)
    out, err = capsys.readouterr()
    assert (tmp_path / "out.jsonl").exists(), (code, err)
    got = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [g["wave"] for g in got] == [0, 1]
    if wrong is None:
        assert code == 0 and "2 passed, 0 failed" in err, err
        want = expected_outputs(params, [root, dict(root, tag=1, node_ptr=[child, 0])])
        assert [g["result"]["dw"][0] for g in got] == [w["result"]["dw"][0] for w in want]
        assert got[0]["result"]["dw"][0] == child
    else:
        assert code == 1 and "1 passed, 1 failed (first: transaction 1)" in err, err
    os.close(master)
