"""The UART harness on cocotb/Verilator (exported Verilog, lines driven bit by bit) and the
`gpurtl board` command: its refusals, and a small bitstream (slow)."""

import json
import os
import pty
import threading

import numpy as np
import pytest
from amaranth.hdl import Shape

from gpurtl.hdl.board.harness import ERR_COMMAND
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.harness.golden_io import golden_outputs
from gpurtl.sim.tools import board
from gpurtl.sim.tools.board import parse_responses, request_bytes, run_verilator
from gpurtl.sim.tools.cli import main

from .pty_board import serve

SMALLEST_RAY_ACCEL = {"engines": "1", "boxes_per_engine": "1", "triangles": "0", "transforms": "0"}


def _over_the_uart(name, overrides, count, seed):
    block = registry.get(name)
    params = block.resolve(overrides)
    in_layout, out_layout = block.layouts(**params)
    inputs = block.stimulus(np.random.default_rng(seed), count, **params)
    expected = golden_outputs(block, params, inputs)
    frames = b"".join(request_bytes(in_layout, value) for value in inputs)
    out_bytes = 1 + (Shape.cast(out_layout).width + 7) // 8
    divisor = 4
    # every byte is 10 bits; the responses follow the last request within the block's latency
    max_cycles = (len(frames) + count * out_bytes) * 10 * divisor + 2000
    received = run_verilator(
        block,
        params,
        [(frames, 0)],
        divisor=divisor,
        expect=count * out_bytes,
        max_cycles=max_cycles,
    )
    results = parse_responses(out_layout, received)
    assert [kind for kind, _ in results] == ["result"] * count
    for index, ((_, got), want) in enumerate(zip(results, expected)):
        field = layouts.diff(
            out_layout, layouts.pack(out_layout, want), layouts.pack(out_layout, got)
        )
        assert field is None, f"transaction {index}: {field}"


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_fp32_cmp_harness_on_verilator():
    _over_the_uart("fp32_cmp", {}, count=6, seed=1)


@pytest.mark.slow
@pytest.mark.verilator
def test_smallest_ray_accel_harness_on_verilator():
    """Real BVH8 / instance / legacy-box instructions from the registry stimulus."""
    _over_the_uart("ray_accel", SMALLEST_RAY_ACCEL, count=5, seed=3)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["board", "ulx3s", "fp32_add", "--baud", "7000000"], "--baud: `baud` must be within 2 %"),
        (
            ["board", "ulx3s", "fp32_add", "--baud", "0"],
            "--baud: `baud` must be a positive integer",
        ),
        (["board", "ulx3s", "waitcnt"], "is cycle-stepped"),
        (["board", "ulx3s", "fp32_add", "-p", "stages=99"], "parameter `stages` must be"),
    ],
)
def test_board_refuses_bad_options_in_one_line(tmp_path, capsys, argv, message):
    output = tmp_path / "x.bit"
    assert main(argv + ["-o", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not output.exists()


@pytest.mark.slow
def test_board_bitstream_of_a_small_block(tmp_path, capsys):
    output = tmp_path / "cmp.bit"
    assert main(["board", "ulx3s", "fp32_cmp", "-o", str(output)]) == 0
    out, err = capsys.readouterr()
    assert "Fmax" in out and "yosys (synth_ecp5): done" in err
    # ecppack's comment header names the part; the ECP5 sync word 0xBDB3 follows it
    head = output.read_bytes()[:256]
    assert b"Part: LFE5U-85F-6CABGA381" in head and b"\xff\xff\xbd\xb3" in head


def _fake_board(master, block, params, *, answer_error=False):
    """Play the programmed board: answer golden results, or an error code to every request."""
    in_layout, out_layout = block.layouts(**params)
    model = block.golden(**params)
    serve(
        master,
        in_layout,
        out_layout,
        lambda _, value: ERR_COMMAND if answer_error else model(value),
    )


@pytest.mark.parametrize("answer_error", [False, True])
def test_port_sends_transactions_and_compares_with_golden(tmp_path, capsys, answer_error):
    block = registry.get("fp32_add")
    params = block.resolve({})
    source = tmp_path / "in.jsonl"
    source.write_text('{"a": 1.5, "b": 2.25}\n{"a": "0x7f800000", "b": -1.0, "sub": 1}\n')
    master, slave = pty.openpty()
    board = threading.Thread(
        target=_fake_board,
        args=(master, block, params),
        kwargs={"answer_error": answer_error},
        daemon=True,
    )
    board.start()
    try:
        code = main(
            [
                "board",
                "ulx3s",
                "fp32_add",
                "--port",
                os.ttyname(slave),
                "--input",
                str(source),
                "--results",
                str(tmp_path / "out.jsonl"),
            ]
        )
    finally:
        os.close(slave)
    out, err = capsys.readouterr()
    if answer_error:
        assert (
            code == 1
            and err.strip() == "gpurtl: error: transaction 0: the board answered error 0xe1"
        )
        assert not (tmp_path / "out.jsonl").exists()
    else:
        assert code == 0, err
        assert "2 passed, 0 failed" in err
        lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert [line["z"] for line in lines] == ["0x40700000", "0x7f800000"]  # 3.75, +inf
    os.close(master)


def test_utilisation_reads_nextpnr_device_table(tmp_path):
    """The figures of a design that does not fit come from nextpnr's table, printed before it
    places (the first table; a later one is ignored)."""
    log = tmp_path / "nextpnr.log"
    log.write_text(
        "Info: Device utilisation:\n"
        "Info: \t          TRELLIS_IO:       3/    365     0%\n"
        "Info: \t              DP16KD:      43/    208    20%\n"
        "Info: \t          MULT18X18D:      28/    156    17%\n"
        "Info: \t        TRELLIS_COMB:   91234/  83640   109%\n"
        "Info: \t          TRELLIS_FF:   30000/  83640    35%\n"
        "Info: \t        TRELLIS_COMB:       1/  83640     0%\n"
        "ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'TRELLIS_COMB'\n"
    )
    assert board.utilisation(log) == {
        "BRAM": (43, 208),
        "DSP": (28, 156),
        "LUT4": (91234, 83640),
        "FF": (30000, 83640),
    }
