"""The RT unit's golden model: the accelerator timing, the per-wave return order and the
``bvhcnt`` of every wave, from the outside (what went in and what came out)."""

import numpy as np

from gpurtl.golden.rt_unit import AccelTiming
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io


def test_accelerator_timing_latency_interval_and_stall():
    accel = AccelTiming(lambda instr: instr * 10, groups=3, depth=4)
    taken, seen = [], []
    for cycle in range(30):
        ready = cycle not in (12, 13, 14)  # a three-cycle output stall
        out = accel.out
        if out is not None and ready:
            seen.append((cycle, out))
        if accel.step((cycle, 0), ready):
            taken.append(cycle)
    assert taken[:4] == [0, 3, 6, 9]  # one instruction every `groups` cycles
    assert seen[0] == (7, (0, 0))  # groups + depth cycles after it was taken
    assert [c for c, _ in seen[:3]] == [7, 10, 15]  # the stall holds the output and the entry


def test_bvhcnt_counts_what_is_in_flight_and_a_full_wave_is_refused():
    block = registry.get("rt_unit")
    params = block.small_params()
    inputs = block.stimulus(np.random.default_rng(2), 700, **params)
    outputs = golden_io.golden_outputs(block, params, inputs)
    waves = 1 << params["tag_bits"]
    in_flight = [0] * waves
    full_refusals = 0
    for step_in, out in zip(inputs, outputs):
        assert out["bvh"]["bvhcnt"] == in_flight
        inst = step_in["inst"]
        wave = inst["payload"]["tag"]
        if inst["valid"] and out["inst"]["ready"]:
            in_flight[wave] += 1
        elif inst["valid"] and in_flight[wave] == 7:
            full_refusals += 1
        if out["out"]["valid"] and step_in["out"]["ready"]:
            in_flight[out["out"]["payload"]["wave"]] -= 1
    assert full_refusals > 0


def test_results_are_the_accelerators_on_the_fetched_node():
    """Every result equals the scalar model on its wave's oldest instruction still in flight,
    with that instruction's node from memory: results leave in order within a wave."""
    from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel

    block = registry.get("rt_unit")
    params = block.small_params()
    inputs = block.stimulus(np.random.default_rng(4), 700, **params)
    outputs = golden_io.golden_outputs(block, params, inputs)
    line_data, pending, checked, hits = {}, {}, 0, 0
    model = IntersectModel(paths=frozenset({"box"}))
    for step_in, out in zip(inputs, outputs):
        fill = step_in["fill"]
        if fill["valid"] and out["fill"]["ready"] and not out["err"]["unexpected_fill"]:
            line_data[fill["payload"]["line"]] = fill["payload"]["data"]
        inst = step_in["inst"]
        if inst["valid"] and out["inst"]["ready"]:
            pending.setdefault(inst["payload"]["tag"], []).append(inst["payload"])
        if out["out"]["valid"] and step_in["out"]["ready"]:
            source = pending[out["out"]["payload"]["wave"]].pop(0)
            data = line_data[(source["node_ptr"][0] >> 4) & 0xFF]
            instr = {key: value for key, value in source.items() if key != "tag"}
            instr["node"] = [[(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)], [0] * 32]
            result = out["out"]["payload"]["result"]
            assert result == model(instr)
            checked += 1
            hits += result["status"] == 0 and result["dw"][0] != 0xFFFFFFFF
    assert checked > 50 and hits > 5
