"""The node fetch's golden model end to end: every instruction leaves once, with its own fields,
its tag and the 32 dwords of its node's line; the dual form is flagged."""

import numpy as np
import pytest

from gpurtl.golden.rt_unit import NodeFetchModel
from gpurtl.sim.blocks.rt_unit import MemorySide, _fetch_stimulus


def run(order, seed=3):
    """The stimulus through the golden model: instructions taken and outputs taken, in order,
    and the data of each line the memory returned."""
    params = dict(size=1024, ways=2, mshrs=2, targets=2, id_bits=3, line_bits=8, tag_bits=2)
    rng = np.random.default_rng(seed)
    inputs = _fetch_stimulus(rng, 1500, order=order, **params)
    model = NodeFetchModel(order=order, **params)
    # the memory the stimulus used gave every line a fixed value: learn it from the fills
    line_data, taken, left, duals = {}, [], [], 0
    for step_in in inputs:
        out = model.step(step_in)
        fill = step_in["fill"]
        if fill["valid"] and out["fill"]["ready"] and not out["err"]["unexpected_fill"]:
            line_data[fill["payload"]["line"]] = fill["payload"]["data"]
        if step_in["inst"]["valid"] and out["inst"]["ready"]:
            taken.append(step_in["inst"]["payload"])
            duals += out["err"]["dual"]
        if out["out"]["valid"] and step_in["out"]["ready"]:
            left.append(out["out"]["payload"])
    return taken, left, line_data, duals


@pytest.mark.parametrize("order", ["l0", "wave"])
def test_every_instruction_leaves_once_with_its_node(order):
    taken, left, line_data, duals = run(order)
    assert len(taken) > 150 and len(left) > len(taken) - 20
    assert duals == sum(p["dual"] for p in taken) > 0
    pending = list(taken)
    for result in left:
        instr = result["instr"]
        match = [
            p for p in pending if p["node_ptr"] == instr["node_ptr"] and p["ray"] == instr["ray"]
        ]
        assert match, "an output no instruction asked for"
        source = match[0]
        pending.remove(source)
        assert result["tag"] == source["tag"]
        for key in ("dual", "pointer_flags", "desc"):
            assert instr[key] == source[key]
        line = (source["node_ptr"][0] >> 4) & 0xFF
        data = line_data[line]
        assert instr["node"][0] == [(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)]
        assert instr["node"][1] == [0] * 32


def _per_wave(instructions):
    waves = {}
    for value in instructions:
        instr = value.get("instr", value)  # an output, or an instruction as taken
        key = (instr["node_ptr"][0], instr["ray"]["origin"][0])
        waves.setdefault(value["tag"], []).append(key)
    return waves


def test_wave_order_keeps_each_waves_order_and_l0_order_does_not():
    taken, left, _, _ = run("wave")
    wanted = _per_wave(taken)
    for tag, keys in _per_wave(left).items():
        assert keys == wanted[tag][: len(keys)]
    taken, left, _, _ = run("l0")
    wanted = _per_wave(taken)
    assert any(keys != wanted[tag][: len(keys)] for tag, keys in _per_wave(left).items())
    # both let waves overtake each other
    assert [v["tag"] for v in left] != [v["tag"] for v in taken[: len(left)]]


def test_memory_side_answers_every_request():
    rng = np.random.default_rng(1)
    memory = MemorySide(rng, latencies=(3, 3), p_ready=1.0)
    requested = {"valid": 1, "payload": {"line": 7}}
    mem_req, _ = memory.inputs(0, 8)
    memory.outputs(0, {"mem_req": mem_req, "fill": {"valid": 0}}, {"mem_req": requested})
    offers = [memory.inputs(cycle, 8)[1] for cycle in range(1, 5)]
    assert [o["valid"] for o in offers] == [0, 0, 1, 1]  # due at 3, held until taken
    assert offers[2]["payload"] == {"line": 7, "data": memory.line_data(7)}
