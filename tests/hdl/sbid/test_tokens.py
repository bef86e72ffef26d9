"""Token file (``sbid``): lockstep against the golden model, directed semantics, and the facts.

The directed cases are worked out by hand from the rules in :mod:`gpurtl.hdl.sbid.tokens`; every
one runs on the RTL and the golden model at once.
"""

import numpy as np
import pytest

from gpurtl.facts.sbid import CONFIGS
from gpurtl.golden.sbid import SbidTokensModel
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.blocks.sbid import _token_defaults
from gpurtl.sim.core import registry
from gpurtl.sim.harness import golden_io

BLOCK = registry.get("sbid")


@pytest.mark.parametrize(
    "params",
    [
        {"threads": 2, "tokens": 4},
        {"threads": 3, "tokens": 2},
        {"threads": 8, "tokens": 16},
        {"threads": 5, "tokens": 32},
    ],
)
def test_lockstep_random(params):
    params = BLOCK.resolve(params)
    count = 800 if params["tokens"] >= 16 else 2500
    report = BACKENDS["pysim"].check(BLOCK, params, count=count, seed=13)
    assert report.failed == 0, str(report.first)
    assert report.passed == count


def test_stimulus_reaches_every_corner():
    """The random stimulus exercises stalls, full token sets, refused sends and every error."""
    params = BLOCK.resolve({"threads": 2, "tokens": 4})
    inputs = BLOCK.stimulus(np.random.default_rng(13), 2500, **params)
    outputs = golden_io.golden_outputs(BLOCK, params, inputs)
    refused = [i["issue"]["valid"] and not o["issue_accepted"] for i, o in zip(inputs, outputs)]
    seen = {
        "stall": sum(o["stall"] != 0 for o in outputs),
        "full": sum(any(b == 0b1111 for b in o["busy"]) for o in outputs),
        "alloc_refused": sum(r and i["issue"]["alloc"] for r, i in zip(refused, inputs)),
        "set_busy": sum(o["err"]["set_busy"] for o in outputs),
        "wait_unset": sum(o["err"]["wait_unset"] for o in outputs),
        "ret_idle": sum(o["err"]["ret_idle"] for o in outputs),
    }
    # a token counts as never set only until its first send: few such waits after the start
    assert seen.pop("wait_unset") >= 3
    assert all(value > 10 for value in seen.values()), seen


def test_lockstep_detects_a_wrong_model():
    """A golden model whose allocator takes the highest free token instead of the lowest is
    caught, at ``issue_sbid``."""
    params = BLOCK.resolve({"threads": 2, "tokens": 4})

    class Broken(SbidTokensModel):
        def _issue(self, issue):
            accepted, token, set_busy = super()._issue(issue)
            if accepted and issue["alloc"]:
                free = [k for k in range(self.tokens) if not (self.busy[issue["thread"]] >> k) & 1]
                token = free[-1]
            return accepted, token, set_busy

    model = Broken(2, 4)
    inputs = BLOCK.stimulus(np.random.default_rng(3), 400, **params)
    expected = [model.step(i) for i in inputs]
    report = BACKENDS["pysim"].run(BLOCK, params, inputs, expected=expected)
    assert report.failed > 0
    assert report.first.field in ("issue_sbid", "busy[0]", "busy[1]")


def cycle(issue=None, wait=None, ret=None):
    c = _token_defaults(2, 4)
    if issue:  # (thread, sbid) names a token; (thread, None) allocates one
        thread, sbid = issue
        c["issue"] = {"valid": 1, "thread": thread, "sbid": sbid or 0, "alloc": int(sbid is None)}
    if wait:
        c["wait"] = {"valid": 1, "thread": wait[0], "mask": wait[1]}
    if ret:
        c["ret"] = {"valid": 1, "thread": ret[0], "sbid": ret[1]}
    return c


def run_rtl(cycles):
    params = BLOCK.resolve({"threads": 2, "tokens": 4})
    golden = golden_io.golden_outputs(BLOCK, params, cycles)
    report = BACKENDS["pysim"].run(BLOCK, params, cycles, expected=golden)
    assert report.failed == 0, str(report.first)
    return golden


def test_wait_on_one_token_ignores_the_others():
    """$0 and $1 set; a wait on $1.dst stalls until $1 returns, whatever $0 does: no false
    dependency between the two loads."""
    cycles = [
        cycle(issue=(1, 0)),
        cycle(issue=(1, 1)),
        cycle(wait=(1, 0b0010)),
        cycle(),
        cycle(ret=(1, 1)),  # $1 returns before $0 (out of order)
        cycle(),
        cycle(),
        cycle(ret=(1, 0)),
        cycle(),
    ]
    out = run_rtl(cycles)
    assert [(o["stall"] >> 1) & 1 for o in out] == [0, 0, 0, 1, 1, 0, 0, 0, 0]
    assert [o["busy"][1] for o in out] == [0, 1, 3, 3, 3, 1, 1, 1, 0]
    assert all(o["stall"] & 1 == 0 and o["busy"][0] == 0 for o in out)
    assert not any(any(o["err"].values()) for o in out)


def test_send_and_wait_in_one_cycle_and_second_wait_adds_tokens():
    cycles = [
        cycle(issue=(0, 2), wait=(0, 0b0100)),  # the send is older: the wait covers it
        cycle(issue=(0, 3)),
        cycle(wait=(0, 0b1000)),
        cycle(ret=(0, 2)),
        cycle(),
        cycle(ret=(0, 3)),
        cycle(),
    ]
    out = run_rtl(cycles)
    assert [o["stall"] & 1 for o in out] == [0, 1, 1, 1, 1, 1, 0]
    assert out[0]["err"]["wait_unset"] == 0


def test_allocation_takes_the_lowest_free_token_and_stalls_when_none_is_free():
    cycles = [cycle(issue=(0, None)) for _ in range(5)]
    cycles += [cycle(issue=(0, None), ret=(0, 2)), cycle(issue=(0, None)), cycle()]
    out = run_rtl(cycles)
    assert [o["issue_accepted"] for o in out] == [1, 1, 1, 1, 0, 0, 1, 0]
    assert [o["issue_sbid"] for o in out] == [0, 1, 2, 3, 0, 0, 2, 0]
    # no free token is the bound, not an error
    assert not any(o["err"]["set_busy"] for o in out)


def test_misuse_is_flagged_and_changes_nothing():
    cycles = [
        cycle(wait=(0, 0b0001)),  # $0 never set: flagged, no stall
        cycle(issue=(0, 0)),
        cycle(issue=(0, 0)),  # $0 busy: refused and flagged
        cycle(ret=(0, 1)),  # $1 not busy: flagged, ignored
        cycle(ret=(0, 0)),
        cycle(issue=(0, 0)),  # free again
        cycle(),
    ]
    out = run_rtl(cycles)
    assert [o["err"]["wait_unset"] for o in out] == [1, 0, 0, 0, 0, 0, 0]
    assert [o["err"]["set_busy"] for o in out] == [0, 0, 1, 0, 0, 0, 0]
    assert [o["err"]["ret_idle"] for o in out] == [0, 0, 0, 1, 0, 0, 0]
    assert [o["issue_accepted"] for o in out] == [0, 1, 0, 0, 0, 1, 0]
    assert [o["busy"][0] for o in out] == [0, 0, 1, 1, 1, 0, 1]
    assert all(o["stall"] == 0 for o in out)


def test_inputs_for_a_thread_out_of_range_are_ignored():
    params = BLOCK.resolve({"threads": 3, "tokens": 4})
    c = _token_defaults(3, 4)
    c["issue"] = {"valid": 1, "thread": 3, "sbid": 0, "alloc": 1}
    c["wait"] = {"valid": 1, "thread": 3, "mask": 0b1111}
    c["ret"] = {"valid": 1, "thread": 3, "sbid": 0}
    cycles = [c, _token_defaults(3, 4)]
    golden = golden_io.golden_outputs(BLOCK, params, cycles)
    assert golden[0]["issue_accepted"] == 0 and not any(golden[0]["err"].values())
    assert golden[1]["busy"] == [0, 0, 0] and golden[1]["stall"] == 0
    report = BACKENDS["pysim"].run(BLOCK, params, cycles, expected=golden)
    assert report.failed == 0, str(report.first)


def test_token_counts_follow_the_sources():
    # IGC visa/G4_Kernel.cpp GRFMode and Chips and Cheese's Xe3 article: Xe2 16 tokens with
    # eight threads or 32 with four (128 per XVE); Xe3 32 per thread, 320 per XVE at 10 threads.
    assert (CONFIGS["xe2"].threads, CONFIGS["xe2"].tokens) == (8, 16)
    assert (CONFIGS["xe2_large_grf"].threads, CONFIGS["xe2_large_grf"].tokens) == (4, 32)
    assert CONFIGS["xe2"].tokens_per_eu == CONFIGS["xe2_large_grf"].tokens_per_eu == 128
    assert CONFIGS["xe3_96"].tokens_per_eu == 320
    assert {c.tokens for n, c in CONFIGS.items() if n.startswith("xe3")} == {32}
    assert (CONFIGS["gen12"].threads, CONFIGS["gen12"].tokens) == (7, 16)
    # IGC's Xe3 rows: 128 GRF 8 threads, 160 GRF 6, 192 GRF 5, 256 GRF 4
    threads = [CONFIGS[n].threads for n in ("xe3", "xe3_160", "xe3_192", "xe3_large_grf")]
    assert threads == [8, 6, 5, 4]


def test_bad_parameters_are_refused():
    from gpurtl.hdl.sbid import SbidTokens

    with pytest.raises(ValueError, match="`tokens` must be one of"):
        SbidTokens(2, 12)
    with pytest.raises(ValueError, match="`threads` must be an integer from 1 to 16"):
        SbidTokens(0, 16)
