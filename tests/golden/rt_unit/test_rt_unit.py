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


def test_bvhcnt_counts_wave_instructions_in_flight_and_a_full_wave_is_refused():
    """RDNA 4's ``bvhcnt`` (ISA guide, ``S_WAIT_BVHCNT``) goes up when a wave issues an
    intersect instruction and down when all its lanes' results are back, at most 7. Observed
    from outside: the lanes each instruction had (up to its ``last`` lane) and the results in
    wave order."""
    block = registry.get("rt_unit")
    params = block.small_params()
    inputs = block.stimulus(np.random.default_rng(2), 1500, **params)
    outputs = golden_io.golden_outputs(block, params, inputs)
    waves = 1 << params["tag_bits"]
    lanes = [[] for _ in range(waves)]  # per wave: lane counts of its instructions, oldest first
    open_ = [False] * waves  # a wave's instruction has lanes taken, its last lane not yet
    back = [0] * waves  # results back of the wave's oldest instruction
    full_refusals = 0
    for step_in, out in zip(inputs, outputs):
        assert out["bvh"]["bvhcnt"] == [len(q) for q in lanes]
        inst = step_in["inst"]
        wave, last = inst["payload"]["tag"], inst["payload"]["last"]
        if inst["valid"] and not open_[wave] and len(lanes[wave]) == 7:
            assert not out["inst"]["ready"], "a wave with 7 instructions in flight issued"
            full_refusals += 1
        if inst["valid"] and out["inst"]["ready"]:
            if not open_[wave]:
                lanes[wave].append(0)
            lanes[wave][-1] += 1
            open_[wave] = not last
        if out["out"]["valid"] and step_in["out"]["ready"]:
            w = out["out"]["payload"]["wave"]
            back[w] += 1
            done = back[w] == lanes[w][0] and not (open_[w] and len(lanes[w]) == 1)
            assert out["out"]["payload"]["last"] == int(done)
            if done:
                lanes[w].pop(0)
                back[w] = 0
    assert full_refusals > 0


def _directed_unit(**changes):
    """The ``rt_unit`` golden model (small build, ``changes``) with a memory answering every
    line request after 2..5 cycles, and a function offering it one cycle's inputs."""
    from gpurtl.hdl.rt_unit import fetch_layout
    from gpurtl.sim.blocks.rt_unit import MemorySide
    from gpurtl.sim.core import layouts

    block = registry.get("rt_unit")
    params = block.resolve(dict(block.small, **changes))
    model = block.golden(**params)
    memory = MemorySide(np.random.default_rng(0), latencies=(2, 5), p_ready=1.0)
    idle = layouts.unpack(fetch_layout(params["tag_bits"]), 0)
    cycle = [0]

    def step(lane=None, out_ready=0):
        """``lane``: ``(wave, last, line)`` offered, or None."""
        payload = dict(idle)
        if lane is not None:
            payload.update(tag=lane[0], last=lane[1], node_ptr=[(lane[2] << 4) | 5, 0])
        mem_req, fill = memory.inputs(cycle[0], params["line_bits"])
        inputs = {
            "inst": {"valid": int(lane is not None), "payload": payload},
            "out": {"ready": out_ready},
            "mem_req": mem_req,
            "fill": fill,
            "wait": {"valid": 0, "wave": 0, "word": 0},
        }
        out = model.step(inputs)
        memory.outputs(cycle[0], inputs, out)
        cycle[0] += 1
        return out

    return step


def _issue(step, lanes, out_ready=0, limit=200):
    """Offer ``lanes`` (``(wave, last, line)``) in order, each held until taken; the outputs
    of every cycle."""
    seen = []
    for lane in lanes:
        for _ in range(limit):
            seen.append(step(lane, out_ready))
            if seen[-1]["inst"]["ready"]:
                break
        else:
            raise AssertionError(f"lane {lane} not taken in {limit} cycles")
    return seen


def test_one_instruction_of_32_lanes_is_one_bvhcnt():
    step = _directed_unit(id_bits=5)
    seen = _issue(step, [(1, int(k == 31), k % 4) for k in range(32)], out_ready=1)
    counts = [out["bvh"]["bvhcnt"][1] for out in seen]
    assert counts[0] == 0 and set(counts[1:]) == {1}  # visible from the cycle after the issue
    results, lasts = 0, []
    for _ in range(300):
        out = step(None, out_ready=1)
        seen.append(out)
        if out["bvh"]["bvhcnt"][1] == 0:
            break
    for out in seen:
        if out["out"]["valid"]:
            results += 1
            lasts.append(out["out"]["payload"]["last"])
    assert results == 32 and lasts == [0] * 31 + [1]
    assert seen[-1]["bvh"]["bvhcnt"] == [0, 0, 0, 0]


def test_the_eighth_instruction_of_a_wave_waits_for_the_first_to_complete():
    step = _directed_unit(id_bits=5)
    seven = [(2, int(k % 3 == 2), k) for k in range(21)]  # seven instructions of 3 lanes
    _issue(step, seven)  # results held (out.ready low)
    for _ in range(20):
        out = step((2, 0, 30))  # the eighth's first lane
        assert not out["inst"]["ready"] and out["bvh"]["bvhcnt"][2] == 7
    assert _issue(step, [(0, 1, 31)])[-1]["inst"]["ready"]  # another wave is not held
    out = step((2, 0, 30), out_ready=1)
    taken = 0
    for _ in range(100):  # results drain; the eighth goes once the first's three are back
        if out["inst"]["ready"]:
            break
        taken += out["out"]["valid"]
        out = step((2, 0, 30), out_ready=1)
    assert out["inst"]["ready"]
    assert taken == 3 and out["bvh"]["bvhcnt"][2] == 6
    # its later lanes are not refused for the count, though 7 are in flight again
    assert step((2, 1, 29))["inst"]["ready"]


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
            instr = {k: v for k, v in source.items() if k not in ("tag", "last")}
            instr["node"] = [[(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)], [0] * 32]
            result = out["out"]["payload"]["result"]
            assert result == model(instr)
            checked += 1
            hits += result["status"] == 0 and result["dw"][0] != 0xFFFFFFFF
    assert checked > 50 and hits > 5


def _legacy(data, ptr):
    """A legacy node's dwords in its line (64 bytes at the pointer's half; 128 for box32)."""
    dwords = [(data >> (32 * k)) & 0xFFFFFFFF for k in range(32)]
    if ptr & 8:
        return dwords[16:] + [0] * 16
    return dwords if ptr & 7 not in (0, 1, 4) else dwords[:16] + [0] * 16


def test_dual_build_results_are_the_accelerators_on_both_fetched_nodes():
    """``dual=True``: every result equals the scalar model on its instruction with both nodes
    as memory holds them (the second the empty node where its pointer is 0x5)."""
    from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel

    block = registry.get("rt_unit")
    params = block.resolve(block.small_params() | {"dual": True})
    inputs = block.stimulus(np.random.default_rng(4), 700, **params)
    outputs = golden_io.golden_outputs(block, params, inputs)
    line_data, pending, checked = {}, {}, {0: 0, 1: 0}
    model = IntersectModel(paths=frozenset({"box"}))
    empty = [0xFFFFFFFF] * 4 + [0x7FC00000] * 24 + [0] * 4
    for step_in, out in zip(inputs, outputs):
        fill = step_in["fill"]
        if fill["valid"] and out["fill"]["ready"] and not out["err"]["unexpected_fill"]:
            line_data[fill["payload"]["line"]] = fill["payload"]["data"]
        inst = step_in["inst"]
        if inst["valid"] and out["inst"]["ready"]:
            pending.setdefault(inst["payload"]["tag"], []).append(inst["payload"])
        assert out["err"]["dual"] == 0
        if out["out"]["valid"] and step_in["out"]["ready"]:
            source = pending[out["out"]["payload"]["wave"]].pop(0)
            p0, p1 = source["node_ptr"]
            d0 = line_data[(p0 >> 4) & 0xFF]
            instr = {k: v for k, v in source.items() if k not in ("tag", "last")}
            if source["dual"]:
                second = empty if p1 == 0x5 else _legacy(line_data[(p1 >> 4) & 0xFF], p1)
                instr["node"] = [_legacy(d0, p0), second]
            else:
                instr["node"] = [[(d0 >> (32 * k)) & 0xFFFFFFFF for k in range(32)], [0] * 32]
            assert out["out"]["payload"]["result"] == model(instr)
            checked[source["dual"]] += 1
    assert min(checked.values()) > 20, checked
