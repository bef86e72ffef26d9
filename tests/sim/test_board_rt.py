"""``gpurtl board ulx3s rt_unit``: the board block's parameters, the scene image, the refusals,
and the bitstream of the smallest build (slow)."""

import pytest

from gpurtl.sim.board_rt import board_block, scene_image
from gpurtl.sim.cli import main
from gpurtl.sim.core import registry

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
        (["rt_unit", "--port", "/dev/null", "--input", "x.jsonl"], "--port: exchanging"),
    ],
)
def test_board_refuses_bad_rt_unit_options_in_one_line(tmp_path, capsys, argv, message):
    output = tmp_path / "x.bit"
    assert main(["board", "ulx3s", *argv, "-o", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not output.exists()


@pytest.mark.slow  # Yosys and nextpnr on the whole RT unit: more than 30 min of CPU (docs/fpga.md)
def test_smallest_rt_unit_bitstream(tmp_path, capsys):
    output = tmp_path / "rt.bit"
    code = main(["board", "ulx3s", "rt_unit", *SMALLEST, "-o", str(output)])
    out, err = capsys.readouterr()
    if code:  # the design misses 25 MHz: no bitstream, one error line naming the Fmax
        assert "not the board's 25 MHz" in err and "LUT4 " in err and not output.exists()
        return
    assert "LUT4" in out and "BRAM" in out
    head = output.read_bytes()[:256]
    assert b"Part: LFE5U-85F-6CABGA381" in head and b"\xff\xff\xbd\xb3" in head
