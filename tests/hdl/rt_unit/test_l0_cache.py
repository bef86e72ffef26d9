"""The L0 cache's RTL against its golden model, cycle by cycle: random traffic with random
valid/ready stalls on all four streams, out-of-order fills and misuse, over several geometries;
the stimulus reaches every case; a wrong golden model is caught."""

import numpy as np
import pytest

from gpurtl.golden.rt_unit import HIT, MISS, PENDING, L0CacheModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.blocks.rt_unit import drive_with_memory
from gpurtl.sim.core import export, registry
from gpurtl.sim.harness import golden_io

from .compiled import COCOTB

BLOCK = registry.get("l0_cache")

GEOMETRIES = [
    {},  # the default build: 2 KB, 4 ways, 4 MSHRs x 4 targets
    {"size": 1024, "ways": 2, "mshrs": 2, "targets": 2, "line_bits": 8},
    {"size": 512, "ways": 1, "mshrs": 1, "targets": 1},  # direct mapped, one miss at a time
    {"size": 1024, "ways": 8, "mshrs": 3, "targets": 5, "id_bits": 3},  # one set: fully assoc.
    {"replacement": "plru"},
    {"size": 1024, "ways": 8, "mshrs": 3, "targets": 5, "id_bits": 3, "replacement": "plru"},
    {"size": 256, "ways": 2, "mshrs": 2, "targets": 2, "replacement": "plru"},
    {"size": 2048, "ways": 16, "mshrs": 4, "targets": 2, "replacement": "plru"},
    {"beats": 4},  # a line in four 256-bit fill transfers
    {"size": 512, "ways": 1, "mshrs": 1, "targets": 1, "beats": 32},
    {"size": 1024, "ways": 8, "mshrs": 3, "targets": 5, "replacement": "plru", "beats": 2},
]


def geometry_id(overrides):
    return "-".join(str(overrides.get(k, "default")) for k in ("size", "replacement", "beats"))


@pytest.mark.parametrize("overrides", GEOMETRIES, ids=geometry_id)
def test_lockstep_random(overrides):
    params = BLOCK.resolve(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=2000, seed=11)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2000


def test_stimulus_reaches_every_case():
    params = BLOCK.resolve()
    inputs = BLOCK.stimulus(np.random.default_rng(11), 2000, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    kinds = [o["event"]["kind"] for o in outputs if o["event"]["valid"]]
    for kind in (HIT, PENDING, MISS):
        assert kinds.count(kind) > 30, kind
    assert sum(o["err"]["unexpected_fill"] for o in outputs) >= 1
    refused = [i["req"]["valid"] and not o["req"]["ready"] for i, o in zip(inputs, outputs)]
    assert sum(refused) > 50
    stalled = [o["resp"]["valid"] and not i["resp"]["ready"] for i, o in zip(inputs, outputs)]
    assert sum(stalled) > 50
    assert sum(not o["fill"]["ready"] and i["fill"]["valid"] for i, o in zip(inputs, outputs))
    # The sources keep to the stream rule: an offer not taken is offered again unchanged.
    for name in ("req", "fill"):
        for k in range(1, len(inputs)):
            before, now = inputs[k - 1][name], inputs[k][name]
            if before["valid"] and not outputs[k - 1][name]["ready"]:
                assert now == before


def test_stimulus_with_beats_pauses_between_beats_and_is_refused():
    """Four beats a line: the memory pauses inside lines, and first beats are refused while an
    earlier line's requests are answered (inside a line no drain can start)."""
    params = BLOCK.resolve({"beats": 4})
    inputs = BLOCK.stimulus(np.random.default_rng(11), 2000, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    taken = [i["fill"]["valid"] and o["fill"]["ready"] for i, o in zip(inputs, outputs)]
    refused = [i["fill"]["valid"] and not o["fill"]["ready"] for i, o in zip(inputs, outputs)]
    beat, paused = 0, 0
    for k in range(len(inputs)):
        paused += bool(beat) and not inputs[k]["fill"]["valid"]
        beat = (beat + taken[k]) % 4
    assert sum(taken) > 200 and paused > 20 and sum(refused) > 5
    assert sum(o["err"]["unexpected_fill"] for o in outputs) >= 1


def test_a_wrong_golden_model_is_caught(monkeypatch):
    """With the golden model's replacement turned into FIFO (a hit no longer refreshes its way),
    the lockstep check must fail."""
    original = L0CacheModel._touch

    def fifo(self, s, way):
        if self.tags[s][way] is None or self.tags[s][way][1] or self.lru[s][0] == way:
            original(self, s, way)

    monkeypatch.setattr(L0CacheModel, "_touch", fifo)
    params = BLOCK.resolve({"size": 512, "ways": 4})
    report = BACKENDS["pysim"].check(BLOCK, params, count=2000, seed=11)
    assert report.failed > 0


def test_a_wrong_plru_golden_model_is_caught(monkeypatch):
    """With the golden model's tree bits left alone on hits (only misses update them), the
    lockstep check of a PLRU build must fail."""
    original = L0CacheModel._touch

    def misses_only(self, s, way):
        if self.geometry.replacement == "lru" or self.tags[s][way] is None:
            original(self, s, way)

    monkeypatch.setattr(L0CacheModel, "_touch", misses_only)
    params = BLOCK.resolve({"size": 512, "ways": 4, "replacement": "plru"})
    report = BACKENDS["pysim"].check(BLOCK, params, count=2000, seed=11)
    assert report.failed > 0


def one_set_traffic(params, count, seed):
    """Inputs of random traffic on ``ways + 3`` lines of one set, with stalls and random
    latencies (:func:`drive_with_memory`), and the way each accepted miss filled."""
    rng = np.random.default_rng(seed)
    sets = params["size"] // (128 * params["ways"])
    pool = [sets * k for k in range(1, params["ways"] + 4)]
    counter = [0]

    def offer():
        counter[0] += 1
        return {"id": counter[0] % (1 << params["id_bits"]), "line": pool[rng.integers(len(pool))]}

    offer.idle = {"id": 0, "line": 0}
    model = L0CacheModel(**params)
    inputs = drive_with_memory(rng, count, model, offer, ("req", "resp"), params["line_bits"])
    replay, victims = L0CacheModel(**params), []
    for step_in in inputs:
        kind, way = replay.lookup(step_in["req"]["payload"]["line"])
        if replay.step(step_in)["event"]["valid"] and kind == MISS:
            victims.append(way)
    return inputs, victims


@pytest.mark.parametrize("ways", [2, 4, 8])
def test_plru_replaces_every_way_on_the_rtl(ways):
    """One set, more lines than ways: under tree PLRU every way is a victim many times, and the
    RTL makes the same choices (lockstep on the golden model's outputs)."""
    params = BLOCK.resolve({"size": 128 * ways, "ways": ways, "replacement": "plru"})
    inputs, victims = one_set_traffic(params, 1500, seed=ways)
    assert all(victims.count(w) >= 5 for w in range(ways)), victims
    expected = golden_io.golden_outputs(BLOCK, params, inputs)
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed == 0, str(report.first)


@pytest.mark.parametrize("replacement", ["lru", "plru"])
def test_a_pending_victim_holds_the_miss_on_the_rtl(replacement):
    """Two ways, both lines missing: a third line's victim is pending (way 0 under both
    policies: LRU's oldest, and the tree's root points away from way 1), so the miss is refused
    until way 0's fill; then it is taken and replaces way 0."""
    params = BLOCK.resolve(
        {"size": 256, "ways": 2, "mshrs": 4, "line_bits": 8, "replacement": replacement}
    )
    idle = BLOCK.input_defaults(params)

    def req(rid, line):
        return dict(idle, req={"valid": 1, "payload": {"id": rid, "line": line}})

    fill = dict(idle, fill={"valid": 1, "payload": {"line": 2, "data": 7}})
    inputs = [req(0, 2), req(1, 4), req(2, 6), req(2, 6), fill, req(2, 6), idle, idle]
    expected = golden_io.golden_outputs(BLOCK, params, inputs)
    events = [(o["event"]["valid"], o["event"]["kind"]) for o in expected]
    assert events[:6] == [(1, MISS), (1, MISS), (0, 0), (0, 0), (0, 0), (1, MISS)]
    assert [o["req"]["ready"] for o in expected[2:4]] == [0, 0]
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed == 0, str(report.first)


def test_beats_and_a_stray_line_on_the_rtl():
    """Four beats a line: a stray line's error at its last beat, then the real line assembled
    from its beats and answered (the golden model's outputs, checked by hand here too)."""
    params = BLOCK.resolve({"beats": 4, "line_bits": 8})
    idle = BLOCK.input_defaults(params)
    value = int.from_bytes(bytes(range(7, 135)), "little")

    def fill(line, data):
        return dict(idle, fill={"valid": 1, "payload": {"line": line, "data": data}})

    stray = [fill(5 if k < 3 else 9, k) for k in range(4)]
    real = [fill(5, (value >> (256 * k)) & ((1 << 256) - 1)) for k in range(4)]
    request = dict(idle, req={"valid": 1, "payload": {"id": 3, "line": 5}})
    ready = dict(idle, mem_req={"ready": 1}, resp={"ready": 1})
    inputs = [request, ready, ready] + stray + real + [ready, ready]
    expected = golden_io.golden_outputs(BLOCK, params, inputs)
    assert [o["err"]["unexpected_fill"] for o in expected[3:11]] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert expected[12]["resp"] == {"valid": 1, "payload": {"id": 3, "data": value}}
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed == 0, str(report.first)


def test_unexpected_fill_on_the_rtl():
    params = BLOCK.resolve()
    idle = BLOCK.input_defaults(params)
    bogus = dict(idle, fill={"valid": 1, "payload": {"line": 77, "data": 5}})
    request = dict(idle, req={"valid": 1, "payload": {"id": 3, "line": 77}})
    inputs = [bogus, request, idle, idle]
    expected = golden_io.golden_outputs(BLOCK, params, inputs)
    assert [o["err"]["unexpected_fill"] for o in expected] == [1, 0, 0, 0]
    assert expected[1]["event"] == {"valid": 1, "kind": MISS}
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed == 0, str(report.first)


def test_bad_geometry_is_refused():
    with pytest.raises(registry.RegistryError, match="power-of-two number of sets"):
        BLOCK.resolve({"size": 1536, "ways": 4})
    with pytest.raises(registry.RegistryError, match="`ways` must be"):
        BLOCK.resolve({"ways": 3})


#: Cycles per compiled simulator: Icarus runs this block at about 50 cycles/s through cocotb.
COMPILED_COUNT = {"verilator": 3000, "icarus": 1000}


@pytest.mark.parametrize("backend", COCOTB)
@pytest.mark.parametrize(
    "overrides", [{}, {"replacement": "plru", "beats": 4}], ids=["lru", "plru-beats4"]
)
def test_lockstep_on_compiled_simulators(backend, overrides):
    params = BLOCK.resolve(overrides)
    count = COMPILED_COUNT[backend]
    report = BACKENDS[backend].check(BLOCK, params, count=count, seed=4)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


@pytest.mark.verilator
def test_exported_verilog_lints_clean():
    params = BLOCK.resolve()
    ok, messages = export.lint(export.to_verilog(BLOCK, params), "l0_cache")
    assert ok, messages
