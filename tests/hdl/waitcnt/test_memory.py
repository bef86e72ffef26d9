"""Return queues and the waitcnt_mem block: lockstep, and the ordering each design promises."""

import pytest

from gpurtl.facts.waitcnt import InstClass
from gpurtl.golden.waitcnt import ReturnQueueModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("waitcnt_mem")


@pytest.mark.parametrize("queue", ["inorder", "ooo"])
@pytest.mark.parametrize("generation", ["gfx12", "gfx11"])
def test_lockstep_random(queue, generation):
    params = BLOCK.resolve(
        {
            "queue": queue,
            "generation": generation,
            "waves": 4,
            "queue_depth": 4,
            "hit_latency": 3,
            "miss_latency": 11,
        }
    )
    report = BACKENDS["pysim"].check(BLOCK, params, count=2500, seed=7)
    assert report.failed == 0, str(report.first)


def test_lockstep_default_size():
    params = BLOCK.resolve({"queue": "inorder"})
    report = BACKENDS["pysim"].check(BLOCK, params, count=400, seed=2)
    assert report.failed == 0, str(report.first)


def drain(model, pushes, cycles):
    """Push (wave, hit) requests one per cycle; return the list of (cycle, wave) returns."""
    returns = []
    for cycle in range(cycles):
        push = pushes[cycle] if cycle < len(pushes) else None
        out = model.step(*(push if push else (None, 0)))
        if out["valid"]:
            returns.append((cycle, out["wave"]))
    return returns


def test_inorder_holds_hits_behind_another_waves_miss():
    model = ReturnQueueModel(depth=8, order="inorder", hit_latency=2, miss_latency=10)
    returns = drain(model, [(1, 0), (0, 1), (0, 1)], 20)
    # Wave 1's miss leaves at cycle 10; wave 0's hits (done at cycles 3 and 4) wait for it.
    assert returns == [(10, 1), (11, 0), (12, 0)]


def test_ooo_lets_other_waves_pass_but_keeps_order_within_a_wave():
    model = ReturnQueueModel(depth=8, order="ooo", hit_latency=2, miss_latency=10)
    returns = drain(model, [(1, 0), (0, 1), (0, 1), (1, 1)], 20)
    # Wave 0's hits leave when done; wave 1's later hit waits behind wave 1's own miss.
    assert returns == [(3, 0), (4, 0), (10, 1), (11, 1)]


def test_full_queue_refuses_the_issue():
    params = BLOCK.resolve({"waves": 2, "queue_depth": 2, "hit_latency": 5, "miss_latency": 9})
    load = {"valid": 1, "wave": 0, "cls": int(InstClass.VMEM_LOAD.value), "hit": 0}
    idle_wait = {"valid": 0, "wave": 0, "word": 0}
    inputs = [{"issue": load, "wait": idle_wait} for _ in range(4)]
    expected = golden_io.golden_outputs(BLOCK, params, inputs)
    assert [o["issue_accepted"] for o in expected] == [1, 1, 0, 0]
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed == 0, str(report.first)
