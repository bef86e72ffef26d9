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


def _dual_run(seed=5, count=1500):
    """The dual build's stimulus through its golden model, as :func:`run`."""
    params = dict(size=1024, ways=2, mshrs=2, targets=2, id_bits=3, line_bits=8, tag_bits=2)
    rng = np.random.default_rng(seed)
    inputs = _fetch_stimulus(rng, count, order="wave", dual=True, **params)
    model = NodeFetchModel(order="wave", dual=True, **params)
    line_data, taken, left, lookups, duals = {}, [], [], 0, 0
    for step_in in inputs:
        out = model.step(step_in)
        fill = step_in["fill"]
        if fill["valid"] and out["fill"]["ready"] and not out["err"]["unexpected_fill"]:
            line_data[fill["payload"]["line"]] = fill["payload"]["data"]
        if step_in["inst"]["valid"] and out["inst"]["ready"]:
            taken.append(step_in["inst"]["payload"])
        if out["out"]["valid"] and step_in["out"]["ready"]:
            left.append(out["out"]["payload"])
        lookups += out["event"]["valid"]
        duals += out["err"]["dual"]
    return taken, left, line_data, lookups, duals


def _legacy_dwords(data, ptr):
    """The node at legacy pointer ``ptr`` in a line: 16 dwords from its 64-byte half; a 128-byte
    type (box32 5, instance 6, 7, and the undefined 2, 3) at the line's start has 32."""
    dwords = [(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)]
    if ptr & 8:
        return dwords[16:] + [0] * 16
    if ptr & 7 in (0, 1, 4):
        return dwords[:16] + [0] * 16
    return dwords


def test_dual_build_fetches_both_nodes_of_the_dual_form():
    taken, left, line_data, lookups, duals = _dual_run()
    assert duals == 0 and len(taken) > 150 and len(left) > len(taken) - 20
    empty = [0xFFFFFFFF] * 4 + [0x7FC00000] * 24 + [0] * 4
    seen = {"empty": 0, "shared": 0, "two": 0}
    for result in left:
        instr = result["instr"]
        p0, p1 = instr["node_ptr"]
        line0, line1 = (p0 >> 4) & 0xFF, (p1 >> 4) & 0xFF
        if not instr["dual"]:
            data = line_data[line0]
            assert instr["node"][0] == [(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)]
            assert instr["node"][1] == [0] * 32
            continue
        assert instr["node"][0] == _legacy_dwords(line_data[line0], p0)
        if p1 == 0x5:
            seen["empty"] += 1
            assert instr["node"][1] == empty
        else:
            seen["shared" if line1 == line0 else "two"] += 1
            assert instr["node"][1] == _legacy_dwords(line_data[line1], p1)
    assert min(seen.values()) > 5, seen
    # one lookup per instruction, and one more for a second node on a line of its own
    second = sum(
        bool(p["dual"] and p1 != 0x5 and (p["node_ptr"][0] ^ p1) >> 4 & 0xFF)
        for p in taken
        for p1 in [p["node_ptr"][1]]
    )
    assert lookups == len(taken) + second


def test_dual_build_keeps_each_waves_order():
    taken, left, _, _, _ = _dual_run(seed=8)
    wanted = _per_wave(taken)
    for tag, keys in _per_wave(left).items():
        assert keys == wanted[tag][: len(keys)]


def test_dual_build_runs_bvh8_instructions_as_the_default_build():
    """Without dual-form instructions the two builds give the same outputs every cycle."""
    params = dict(size=1024, ways=2, mshrs=2, targets=2, id_bits=3, line_bits=8, tag_bits=2)
    inputs = _fetch_stimulus(np.random.default_rng(2), 1000, order="wave", **params)
    for step_in in inputs:
        step_in["inst"]["payload"]["dual"] = 0
    plain = NodeFetchModel(order="wave", **params)
    dual = NodeFetchModel(order="wave", dual=True, **params)
    for step_in in inputs:
        assert dual.step(step_in) == plain.step(step_in)


def test_dual_second_lookup_takes_the_next_cycle_and_holds_the_input():
    """On an empty L0 a dual instruction on two lines asks for both, one cycle apart; no other
    instruction is taken in that second cycle; the output waits for both fills."""
    model = NodeFetchModel(size=512, ways=1, id_bits=2, line_bits=8, tag_bits=1, dual=True)
    payload = _fetch_stimulus(
        np.random.default_rng(0),
        1,
        order="wave",
        size=512,
        ways=1,
        id_bits=2,
        line_bits=8,
        tag_bits=1,
    )[0]["inst"]["payload"]
    payload = dict(payload, tag=0, dual=1, node_ptr=[(3 << 4) | 5, (9 << 4) | 8 | 0])
    no_fill = {"valid": 0, "payload": {"line": 0, "data": 0}}

    def cycle(valid, fill=no_fill):
        return model.step(
            {
                "inst": {"valid": valid, "payload": payload},
                "out": {"ready": 1},
                "mem_req": {"ready": 1},
                "fill": fill,
            }
        )

    first, second, third = cycle(1), cycle(1), cycle(0)
    assert first["inst"]["ready"] == 1 and second["inst"]["ready"] == 0
    assert [first["event"], second["event"]] == [{"valid": 1, "kind": 2}] * 2  # two misses
    assert third["inst"]["ready"] == 1 and third["event"]["valid"] == 0
    asked = [
        o["mem_req"]["payload"]["line"] for o in (first, second, third) if o["mem_req"]["valid"]
    ]
    for _ in range(4):
        out = cycle(0)
        if out["mem_req"]["valid"]:
            asked.append(out["mem_req"]["payload"]["line"])
        assert out["out"]["valid"] == 0
    assert asked == [3, 9]
    fill3 = {"valid": 1, "payload": {"line": 3, "data": 7}}
    assert cycle(0, fill3)["out"]["valid"] == 0
    assert cycle(0)["out"]["valid"] == 0  # the second line is not in yet
    fill9 = {"valid": 1, "payload": {"line": 9, "data": (5 << 512) | 6}}
    outs = [cycle(0, fill9)] + [cycle(0) for _ in range(4)]
    # the L0 writes the fill, answers, and the node buffer holds the line: three cycles
    assert [o["out"]["valid"] for o in outs] == [0, 0, 0, 1, 0]
    out = outs[3]
    assert out["out"]["payload"]["instr"]["node"][0] == [7] + [0] * 31
    assert out["out"]["payload"]["instr"]["node"][1] == [5] + [0] * 31
