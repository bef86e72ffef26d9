"""A self-written cocotb testbench for gpurtl's exported ``fp32_add`` on Icarus Verilog.

It uses nothing of gpurtl's own harness: the ports, the packing and the handshake are written
out below from ``docs/outside.md`` (and ``gpurtl export fp32_add --ports``). It drives the
inputs of ``in.jsonl`` with random gaps and random output back-pressure, and compares the
outputs with the ones ``gpurtl run`` wrote::

    gpurtl export fp32_add -o fp32_add.v
    gpurtl stimulus fp32_add --count 200 --seed 1 -o in.jsonl
    gpurtl run fp32_add --input in.jsonl -o expected.jsonl
    python icarus_fp32_add.py fp32_add.v in.jsonl expected.jsonl

Needs ``pip install cocotb`` (2.x) and Icarus Verilog (Debian: ``apt-get install iverilog``).
``SIM=verilator python icarus_fp32_add.py ...`` runs the same test on Verilator instead.
"""

import json
import os
import random
import sys
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

# The payloads, least significant bit first (`gpurtl export fp32_add --ports`):
#   i__payload (65 bits): a = [31:0], b = [63:32], sub = [64]
#   o__payload (32 bits): z = [31:0]


def number(value):
    """A JSON field: an integer, or a hexadecimal text ("0x3f800000") for an f32 field."""
    return int(value, 0) if isinstance(value, str) else int(value)


def pack_input(line):
    return number(line["a"]) | number(line["b"]) << 32 | number(line.get("sub", 0)) << 64


def read_jsonl(path):
    return [json.loads(text) for text in Path(path).read_text().splitlines() if text.strip()]


@cocotb.test()
async def fp32_add_matches_gpurtl_run(dut):
    inputs = [pack_input(line) for line in read_jsonl(os.environ["FP32_ADD_IN"])]
    expected = [number(line["z"]) for line in read_jsonl(os.environ["FP32_ADD_EXPECTED"])]
    rng = random.Random(1)

    Clock(dut.clk, 10, unit="ns").start()
    # Synchronous, active-high reset: hold `rst` high over two rising edges.
    dut.rst.value = 1
    dut.i__valid.value = 0
    dut.i__payload.value = 0
    dut.o__ready.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)

    sent, got, valid = 0, [], False
    for _ in range(20 * len(inputs) + 100):
        # Drive between the edges. A producer holds valid and the payload until the transfer.
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        if not valid and sent < len(inputs) and rng.random() < 0.7:
            valid = True
            dut.i__payload.value = inputs[sent]
        dut.i__valid.value = int(valid)
        dut.o__ready.value = int(rng.random() < 0.7)
        # Sample once the inputs have settled, before the next rising edge: a transfer happens
        # at that edge where valid and ready are both high.
        await ReadOnly()
        if valid and dut.i__ready.value:
            sent, valid = sent + 1, False
        if dut.o__valid.value and dut.o__ready.value:
            got.append(dut.o__payload.value.to_unsigned())
        if len(got) == len(expected):
            break
    assert sent == len(inputs), f"{sent} of {len(inputs)} inputs accepted"
    assert len(got) == len(expected), f"{len(got)} of {len(expected)} outputs"
    for index, (z, want) in enumerate(zip(got, expected)):
        assert z == want, f"output {index}: z = {z:#010x}, gpurtl run gave {want:#010x}"


def main(verilog, inputs, expected):
    """Compile the Verilog with Icarus and run the test above; returns the exit status."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    simulator = os.environ.get("SIM", "icarus")
    build = Path(f"sim_build_{simulator}").resolve()
    runner = get_runner(simulator)
    runner.build(
        sources=[Path(verilog).resolve()],
        hdl_toplevel="fp32_add",
        build_dir=build,
        timescale=("1ns", "1ps"),
        # Verilator's -Wall style warnings about generated code are not errors.
        build_args=["-Wno-fatal"] if simulator == "verilator" else [],
    )
    results = runner.test(
        test_module=Path(__file__).stem,
        hdl_toplevel="fp32_add",
        build_dir=build,
        extra_env={
            "FP32_ADD_IN": str(Path(inputs).resolve()),
            "FP32_ADD_EXPECTED": str(Path(expected).resolve()),
        },
    )
    tests, failed = get_results(results)
    print(f"{tests - failed} of {tests} cocotb tests passed")
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python icarus_fp32_add.py fp32_add.v in.jsonl expected.jsonl")
    sys.exit(main(*sys.argv[1:]))
