"""The UART harness end to end on the Amaranth simulator: request frames driven bit by bit on
``rx`` into ``fp32_add``, response frames decoded from ``tx`` and compared with the golden model;
the error codes and the resynchronisation after a timeout."""

import numpy as np
import pytest

from gpurtl.hdl.board.harness import ERR_COMMAND, ERR_LINE, ERR_TIMEOUT, REQUEST, UARTHarness
from gpurtl.sim.backends.pysim import simulate
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.harness.golden_io import golden_outputs
from gpurtl.sim.tools.board import drive_uart, parse_responses, request_bytes

DIVISOR = 4


def _fp32_add():
    block = registry.get("fp32_add")
    params = block.resolve({})
    in_layout, out_layout = block.layouts(**params)
    return block, params, in_layout, out_layout


def _session(dut, chunks, expect):
    async def driver(io):
        return await drive_uart(io, chunks, DIVISOR, expect=expect, max_cycles=40_000)

    return simulate(dut, driver)


def test_fp32_add_over_the_uart_matches_the_golden_model():
    block, params, in_layout, out_layout = _fp32_add()
    inputs = block.stimulus(np.random.default_rng(5), 6, **params)
    expected = golden_outputs(block, params, inputs)
    harness = UARTHarness(block.build(**params), divisor=DIVISOR)
    assert (harness.in_bytes, harness.out_bytes) == (9, 4)  # 65 and 32 payload bits
    # all requests back to back: the harness holds each one until the block takes it
    stream = b"".join(request_bytes(in_layout, value) for value in inputs)
    received = _session(harness, [(stream, 0)], expect=len(inputs) * 5)
    results = parse_responses(out_layout, received)
    assert [kind for kind, _ in results] == ["result"] * len(inputs)
    for (_, got), want in zip(results, expected):
        assert layouts.pack(out_layout, got) == layouts.pack(out_layout, want)


def test_request_bytes_are_little_endian_after_the_command():
    _, _, in_layout, _ = _fp32_add()
    frame = request_bytes(in_layout, {"a": 0x3F800000, "b": 0x40000000, "sub": 1})
    assert frame == bytes([REQUEST, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40, 0x01])


def test_errors_are_reported_and_the_host_can_resynchronise():
    block, params, in_layout, out_layout = _fp32_add()
    harness = UARTHarness(block.build(**params), divisor=DIVISOR, timeout=40 * DIVISOR)
    value = {"a": 0x3F800000, "b": 0x3F800000, "sub": 0}  # 1 + 1 = 2
    frame = request_bytes(in_layout, value)
    chunks = [
        (b"\x00", 0),  # not a command byte
        (frame[:4], 60 * DIVISOR),  # a request cut short, then silence: timeout
        (frame, 0),  # a whole request again
    ]
    received = _session(harness, chunks, expect=2 + 5)
    results = parse_responses(out_layout, received)
    assert results[:2] == [("error", ERR_COMMAND), ("error", ERR_TIMEOUT)]
    assert results[2][0] == "result" and results[2][1]["z"] == 0x40000000
    assert len(results) == 3


def test_parse_responses_refuses_a_stray_byte():
    _, _, _, out_layout = _fp32_add()
    with pytest.raises(ValueError, match="byte 1 is 0x12"):
        parse_responses(out_layout, bytes([ERR_LINE, 0x12]))
    with pytest.raises(ValueError, match="truncated"):
        parse_responses(out_layout, bytes([0x5A, 1, 2]))


def test_a_block_without_streams_is_refused():
    waitcnt = registry.get("waitcnt")
    with pytest.raises(TypeError, match="`dut` must have a `i: In\\(stream.Signature"):
        UARTHarness(waitcnt.build(**waitcnt.resolve({})), divisor=DIVISOR)
