"""The L0 cache's temporal hints and scope (geometry ``hints``): hand-worked sequences whose
lookup results are written out here (NT leaves the LRU order, HT protects a way once, LU drops
its line, a wider scope refetches a present line), then replayed on the RTL; random traffic
with random hints and stalls in lockstep on pysim and Verilator; the stimulus reaches every
hint rule; a golden model with a wrong rule is caught."""

import numpy as np
import pytest

from gpurtl.facts.memory_hints import TH, Scope
from gpurtl.golden.rt_unit import HIT, MISS, PENDING, L0CacheModel
from gpurtl.golden.rt_unit import l0_cache as golden_l0
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.blocks.rt_unit import MemorySide
from gpurtl.sim.core import export, registry
from gpurtl.sim.harness import golden_io

from .compiled import COCOTB

BLOCK = registry.get("l0_cache")

GEOMETRIES = [
    {"hints": True},
    {"hints": True, "size": 512, "ways": 4, "mshrs": 2, "targets": 2},  # one set, 4 ways
    {"hints": True, "size": 1024, "ways": 8, "mshrs": 3, "targets": 5, "id_bits": 3},
    {"hints": True, "size": 512, "ways": 1, "mshrs": 1, "targets": 1},
    {"hints": True, "replacement": "plru"},
    {"hints": True, "size": 1024, "ways": 8, "replacement": "plru", "beats": 4},
]


def geometry_id(overrides):
    return "-".join(str(overrides.get(k, "default")) for k in ("size", "ways", "replacement"))


def sequential(params, requests):
    """Inputs that offer ``requests`` (``(line, th, scope)``) one at a time, each after the
    previous one was answered, against a memory with a fixed latency; and the lookup result of
    each (the golden model's ``event.kind``)."""
    model = L0CacheModel(**params)
    memory = MemorySide(np.random.default_rng(0), latencies=(4, 4), p_ready=1.0)
    idle = BLOCK.input_defaults(params)
    inputs, kinds, cycle = [], [], 0
    for rid, (line, th, scope) in enumerate(requests):
        offer = {"id": rid % (1 << params["id_bits"]), "line": line, "th": int(th)}
        offer["scope"] = int(scope)
        answered = accepted = False
        while not answered:
            mem_req, fill = memory.inputs(cycle, params["line_bits"])
            step = dict(idle, mem_req=mem_req, fill=fill, resp={"ready": 1})
            if not accepted:
                step["req"] = {"valid": 1, "payload": offer}
            out = model.step(step)
            memory.outputs(cycle, step, out)
            if out["event"]["valid"]:
                accepted = True
                kinds.append(out["event"]["kind"])
            answered = bool(out["resp"]["valid"]) and out["resp"]["payload"]["id"] == offer["id"]
            inputs.append(step)
            cycle += 1
    return inputs + [idle] * 4, kinds


ONE_SET = {"hints": True, "size": 256, "ways": 2, "mshrs": 2, "targets": 2, "line_bits": 8}
A, B, C = 0, 1, 2  # all in the one set
RT, NT, HT, LU = TH.RT, TH.NT, TH.HT, TH.LU
CU, SE, DEV = Scope.CU, Scope.SE, Scope.DEV

CASES = {
    # A and B fill the two ways; A's NT hit leaves A least recent, so C evicts A
    "nt-hit": (
        [(A, RT, CU), (B, RT, CU), (A, NT, CU), (C, RT, CU), (B, RT, CU), (A, RT, CU)],
        [MISS, MISS, HIT, MISS, HIT, MISS],
    ),
    # the same with A's hit regular: C evicts B
    "rt-hit": (
        [(A, RT, CU), (B, RT, CU), (A, RT, CU), (C, RT, CU), (A, RT, CU), (B, RT, CU)],
        [MISS, MISS, HIT, MISS, HIT, MISS],
    ),
    # an NT fill stays least recent: C (after B's NT miss) evicts B, not A
    "nt-fill": (
        [(A, RT, CU), (B, NT, CU), (C, RT, CU), (A, RT, CU), (B, RT, CU)],
        [MISS, MISS, MISS, HIT, MISS],
    ),
    # HT protects A once: C evicts B; then D (line 3) evicts A (its protection used up)
    "ht": (
        [(A, HT, CU), (B, RT, CU), (C, RT, CU), (A, RT, CU), (3, RT, CU), (3, RT, CU), (B, RT, CU)],
        [MISS, MISS, MISS, HIT, MISS, HIT, MISS],
    ),
    # an LU hit drops A: A misses again, B stays
    "lu": (
        [(A, RT, CU), (B, RT, CU), (A, LU, CU), (A, RT, CU), (B, RT, CU)],
        [MISS, MISS, HIT, MISS, HIT],
    ),
    # a wider scope refetches a present line into its way: SE and DEV miss, CU hits
    "scope": (
        [(A, RT, CU), (A, RT, SE), (A, RT, CU), (A, RT, DEV), (A, RT, CU)],
        [MISS, MISS, HIT, MISS, HIT],
    ),
    # split hints: NT_RT is NT at the L0 (as nt-hit), RT_NT is RT (as rt-hit)
    "nt_rt": (
        [(A, RT, CU), (B, RT, CU), (A, TH.NT_RT, CU), (C, RT, CU), (A, RT, CU)],
        [MISS, MISS, HIT, MISS, MISS],
    ),
    "rt_nt": (
        [(A, RT, CU), (B, RT, CU), (A, TH.RT_NT, CU), (C, RT, CU), (A, RT, CU)],
        [MISS, MISS, HIT, MISS, HIT],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_worked_hint_sequences_on_the_rtl(case):
    requests, expected = CASES[case]
    params = BLOCK.resolve(ONE_SET)
    inputs, kinds = sequential(params, requests)
    assert kinds == expected
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=outputs)
    assert report.failed == 0, str(report.first)


def test_without_hints_the_request_has_no_hint_fields():
    assert set(BLOCK.input_defaults(BLOCK.resolve())["req"]["payload"]) == {"id", "line"}
    assert set(BLOCK.input_defaults(BLOCK.resolve(ONE_SET))["req"]["payload"]) == {
        "id",
        "line",
        "th",
        "scope",
    }


@pytest.mark.parametrize("overrides", GEOMETRIES, ids=geometry_id)
def test_lockstep_random_hints(overrides):
    params = BLOCK.resolve(overrides)
    report = BACKENDS["pysim"].check(BLOCK, params, count=2000, seed=5)
    assert report.failed == 0, str(report.first)
    assert report.passed == 2000


def test_stimulus_reaches_every_hint_rule():
    """Random traffic with hints: NT, HT and LU requests hit and miss, wider scopes meet present
    lines, HT protection turns misses away from the LRU way (checked by replaying the golden
    model and looking at its victims)."""
    params = BLOCK.resolve({"hints": True})
    inputs = BLOCK.stimulus(np.random.default_rng(5), 3000, **params)
    model = L0CacheModel(**params)
    seen, passed_over = {}, 0
    for step in inputs:
        payload = step["req"]["payload"]
        s = payload["line"] % model.sets
        kind, way = model.lookup(payload["line"], payload["scope"])
        lru_first = model.lru[s][0]
        evicting = model.tags[s][lru_first] is not None
        out = model.step(step)
        if out["event"]["valid"]:
            hint = golden_l0.l0_hint_class(payload["th"])
            wide = payload["scope"] > 0
            key = (hint, "wide" if wide else "cu", out["event"]["kind"])
            seen[key] = seen.get(key, 0) + 1
            passed_over += kind == MISS and evicting and way != lru_first
    for hint in ("RT", "NT", "HT", "LU"):
        for kind in (HIT, PENDING, MISS):
            assert seen.get((hint, "cu", kind), 0) >= 3, (hint, kind, seen)
    assert sum(n for (h, w, k), n in seen.items() if w == "wide" and k == MISS) >= 20
    assert passed_over >= 10


@pytest.mark.parametrize(
    "wrong",
    ["nt-touches", "lu-keeps", "scope-ignored"],
)
def test_a_wrong_hint_rule_is_caught(monkeypatch, wrong):
    """The golden model with one hint rule wrong (NT updating the LRU order, an LU hit keeping
    its line, the scope ignored): the lockstep check against the RTL fails."""
    if wrong == "nt-touches":
        monkeypatch.setattr(
            golden_l0,
            "l0_hint_class",
            lambda th: (
                "RT" if th in (1, 4, 6) else {0: "RT", 2: "HT", 3: "LU", 5: "RT", 7: "RT"}[th]
            ),
        )
    elif wrong == "lu-keeps":
        monkeypatch.setattr(
            golden_l0,
            "l0_hint_class",
            lambda th: "NT" if th == 3 else golden_l0.near_far(th)[0] if th != 7 else "RT",
        )
    else:
        original = L0CacheModel.lookup
        monkeypatch.setattr(
            L0CacheModel, "lookup", lambda self, line, scope=0: original(self, line)
        )
    params = BLOCK.resolve({"hints": True})
    report = BACKENDS["pysim"].check(BLOCK, params, count=3000, seed=5)
    assert report.failed > 0


@pytest.mark.parametrize("backend", COCOTB)
def test_lockstep_random_hints_on_compiled_simulators(backend):
    """One build (4 ways, one set: every hint rule in play) on each compiled simulator."""
    params = BLOCK.resolve({"hints": True, "size": 512, "ways": 4})
    count = {"verilator": 3000, "icarus": 1000}[backend]
    report = BACKENDS[backend].check(BLOCK, params, count=count, seed=6)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_the_node_fetch_with_hints_sends_regular_requests():
    """``node_fetch`` built with ``hints`` drives its L0's hint fields with ``TH_RT`` at
    ``SCOPE_CU`` (its golden model's L0 reads a missing hint as those): lockstep holds."""
    fetch = registry.get("node_fetch")
    params = fetch.resolve({"hints": True})
    report = BACKENDS["pysim"].check(fetch, params, count=600, seed=2)
    assert report.failed == 0, str(report.first)


@pytest.mark.verilator
@pytest.mark.parametrize("replacement", ["lru", "plru"])
def test_exported_verilog_with_hints_lints_clean(replacement):
    params = BLOCK.resolve({"hints": True, "replacement": replacement})
    ok, messages = export.lint(export.to_verilog(BLOCK, params), "l0_cache")
    assert ok, messages
