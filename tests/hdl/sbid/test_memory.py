"""``sbid_mem``: lockstep, the return timing, returns out of order, and the token bound."""

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.blocks.sbid import _memory_defaults
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("sbid_mem")


@pytest.mark.parametrize(
    "params",
    [
        {"threads": 2, "tokens": 4, "hit_latency": 2, "miss_latency": 6},
        {"threads": 3, "tokens": 8, "hit_latency": 1, "miss_latency": 1},
        {"threads": 4, "tokens": 16, "hit_latency": 5, "miss_latency": 40},
    ],
)
def test_lockstep_random(params):
    params = BLOCK.resolve(params)
    report = BACKENDS["pysim"].check(BLOCK, params, count=1500, seed=17)
    assert report.failed == 0, str(report.first)
    assert report.passed == 1500


PARAMS = {"threads": 2, "tokens": 4, "hit_latency": 3, "miss_latency": 9}


def send(c, thread, hit, sbid=None):
    c["issue"] = {
        "valid": 1,
        "thread": thread,
        "sbid": sbid or 0,
        "alloc": int(sbid is None),
        "hit": hit,
    }
    return c


def run_rtl(cycles):
    params = BLOCK.resolve(PARAMS)
    golden = golden_io.golden_outputs(BLOCK, params, cycles)
    report = BACKENDS["pysim"].run(BLOCK, params, cycles, expected=golden)
    assert report.failed == 0, str(report.first)
    return golden


def idle():
    return _memory_defaults(**PARAMS)


def test_a_send_returns_after_its_latency_and_others_pass_it():
    """Thread 0's miss (cycle 0) returns at cycle 9, thread 1's hit (cycle 1) at cycle 4 and
    thread 0's own later hit (cycle 2) at cycle 5: nothing waits for an older request."""
    cycles = [send(idle(), 0, 0), send(idle(), 1, 1), send(idle(), 0, 1)] + [
        idle() for _ in range(9)
    ]
    out = run_rtl(cycles)
    returns = [(n, t, o["ret"][t]) for n, o in enumerate(out) for t in (0, 1) if o["ret"][t]]
    assert returns == [(4, 1, 0b0001), (5, 0, 0b0010), (9, 0, 0b0001)]
    assert out[10]["busy"] == [0, 0]


def test_tokens_bound_the_requests_in_flight():
    """Four tokens: the fifth miss of a thread waits until the first returns (cycle 9), then
    takes its token."""
    cycles = [send(idle(), 0, 0) for _ in range(12)]
    out = run_rtl(cycles)
    assert [o["issue_accepted"] for o in out] == [1, 1, 1, 1] + [0] * 6 + [1, 1]
    assert max(bin(o["busy"][0]).count("1") for o in out) == 4
    assert [o["issue_sbid"] for o in out[10:]] == [0, 1]


def test_wait_for_all_tokens_stalls_until_the_last_returns():
    cycles = [send(idle(), 0, 0), send(idle(), 0, 1)]
    wait = idle()
    wait["wait"] = {"valid": 1, "thread": 0, "mask": 0b1111}
    cycles += [wait] + [idle() for _ in range(9)]
    out = run_rtl(cycles)
    assert [o["stall"] & 1 for o in out] == [0, 0, 0] + [1] * 7 + [0, 0]
    assert out[2]["err"]["wait_unset"] == 1  # $2 and $3 were never set
