"""The lockstep harness detects wrong outputs and wrong latencies, and really stalls."""

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.harness import golden_io
from gpurtl.sim.harness.engine import StallPattern

from ..toy import toy_block


def test_correct_pipeline_passes_under_stalls():
    block = toy_block()
    report = BACKENDS["pysim"].check(block, block.resolve(), count=600, seed=5)
    assert (report.passed, report.failed) == (600, 0)
    # 10% free-running, the rest with 70% valid / 70% ready: clearly more cycles than N + latency.
    assert report.cycles > 600 + 3 + 100


def test_no_stalls_means_one_per_cycle():
    block = toy_block()
    params = block.resolve({"stages": "4"})
    inputs = block.stimulus(__import__("numpy").random.default_rng(0), 200, **params)
    report = BACKENDS["pysim"].run(
        block,
        params,
        inputs,
        expected=golden_io.golden_outputs(block, params, inputs),
        stalls=StallPattern(free_run=200),
    )
    assert report.failed == 0
    assert report.cycles == 200 + 4


def test_wrong_golden_is_reported_with_field_and_values():
    def off_by_one(stages):
        return lambda tx: {"s": tx["a"] + tx["b"] + (tx["a"] == 7), "f": tx["f"]}

    block = toy_block(golden=off_by_one)
    report = BACKENDS["pysim"].check(block, block.resolve(), count=3000, seed=1)
    assert report.failed > 0
    assert report.first.field == "s"
    assert "transaction" in report.first.where and "cycle" in report.first.where


def test_wrong_latency_claim_is_reported():
    block = toy_block(claimed_latency=2)
    report = BACKENDS["pysim"].check(block, block.resolve(), count=100, seed=1)
    assert report.latency_errors == 10
    assert report.first.field == "(latency)"


def test_vcd_is_written(tmp_path):
    block = toy_block()
    path = tmp_path / "w.vcd"
    BACKENDS["pysim"].check(block, block.resolve(), count=20, vcd=str(path))
    text = path.read_text()
    assert "$enddefinitions" in text and "i__payload" in text
