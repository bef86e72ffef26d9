"""The board's node memory against its golden model, cycle by cycle on the Amaranth simulator:
random requests (held until taken, some outside the image) and random ``fill.ready`` stalls, at
several latencies; the stimulus reaches every case; a wrong golden model is caught."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from gpurtl.golden.rt_unit.node_rom import NodeRomModel
from gpurtl.hdl.rt_unit.node_rom import NodeRom


def _image(rng, count):
    return [int.from_bytes(rng.bytes(128), "little") for _ in range(count)]


def _lockstep(image, latency, cycles, seed, model=None, line_bits=6):
    """Per-cycle ``(inputs, rtl outputs, golden outputs)`` of a random run."""
    rng = np.random.default_rng(seed)
    dut = NodeRom(image, line_bits=line_bits, latency=latency)
    model = model or NodeRomModel(image, latency)
    trace = []

    async def testbench(ctx):
        offer = None
        for _ in range(cycles):
            if offer is None and rng.random() < 0.6:
                outside = rng.random() < 0.1
                offer = int(
                    rng.integers(len(image), 1 << line_bits)
                    if outside
                    else rng.integers(len(image))
                )
            ready = int(rng.random() < 0.6)
            inputs = {
                "mem_req": {"valid": int(offer is not None), "payload": {"line": offer or 0}},
                "fill": {"ready": ready},
            }
            ctx.set(dut.mem_req.valid, inputs["mem_req"]["valid"])
            ctx.set(dut.mem_req.payload.line, inputs["mem_req"]["payload"]["line"])
            ctx.set(dut.fill.ready, ready)
            valid = ctx.get(dut.fill.valid)
            got = {
                "mem_req": {"ready": ctx.get(dut.mem_req.ready)},
                "fill": {
                    "valid": valid,
                    "payload": {
                        "line": ctx.get(dut.fill.payload.line),
                        "data": ctx.get(dut.fill.payload.data),
                    }
                    if valid
                    else None,
                },
                "err": {"range": ctx.get(dut.err.range)},
            }
            trace.append((inputs, got, model.step(inputs)))
            if offer is not None and got["mem_req"]["ready"]:
                offer = None
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return trace


@pytest.mark.parametrize("latency", [1, 2, 5])
def test_lockstep_random(latency):
    image = _image(np.random.default_rng(3), 20)
    trace = _lockstep(image, latency, 600, seed=latency)
    mismatches = [k for k, (_, got, want) in enumerate(trace) if got != want]
    assert not mismatches, (mismatches[0], trace[mismatches[0]])
    fills = [got["fill"]["payload"] for inputs, got, _ in trace if got["fill"]["valid"]]
    # every case is reached: fills inside and outside the image, stalled fills, refusals
    assert sum(f["line"] < 20 for f in fills) > 20
    assert any(f["line"] >= 20 and f["data"] == 0 for f in fills)
    assert sum(got["err"]["range"] for _, got, _ in trace) >= 2
    assert sum(got["fill"]["valid"] and not i["fill"]["ready"] for i, got, _ in trace) > 10
    assert sum(i["mem_req"]["valid"] and not got["mem_req"]["ready"] for i, got, _ in trace) > 10


def test_fill_timing_and_data_independently():
    """A request taken in cycle t is offered from t + latency; the data is the image's line,
    checked against the image, not the model."""
    image = _image(np.random.default_rng(4), 8)
    trace = _lockstep(image, 3, 300, seed=9)
    taken = [
        (k, i["mem_req"]["payload"]["line"])
        for k, (i, got, _) in enumerate(trace)
        if i["mem_req"]["valid"] and got["mem_req"]["ready"]
    ]
    first = [
        k
        for k, (_, got, _) in enumerate(trace)
        if got["fill"]["valid"]
        and not (k and trace[k - 1][1]["fill"]["valid"] and not trace[k - 1][0]["fill"]["ready"])
    ]
    assert [k for k, _ in taken[: len(first)]] == [k - 3 for k in first]
    for (_, line), k in zip(taken, first):
        payload = trace[k][1]["fill"]["payload"]
        assert payload["line"] == line
        assert payload["data"] == (image[line] if line < len(image) else 0)


def test_a_wrong_golden_model_is_caught():
    image = _image(np.random.default_rng(3), 20)
    trace = _lockstep(image, 2, 300, seed=2, model=NodeRomModel(image, 3))
    assert any(got != want for _, got, want in trace)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="`latency` must be a positive integer"):
        NodeRom([0], latency=0)
    with pytest.raises(ValueError, match="`image` must be a non-empty list"):
        NodeRom([1 << 1024])
    with pytest.raises(ValueError, match="at most 2 \\*\\* line_bits = 4 lines, not 5"):
        NodeRom([0] * 5, line_bits=2)
