"""The sliced backend behind the harness's interface (``BACKENDS["sliced"]``): ``run`` with
every output kept, a real FP32 block checked, and the inputs it refuses, from Python and from the
command line. The compiled cases are in the ``verilator`` tier."""

import numpy as np
import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.sliced import SlicedBackend
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.harness.engine import StallPattern
from gpurtl.sim.harness.golden_io import golden_outputs
from gpurtl.sim.tools import cli

from ...toy import toy_block

compiled = pytest.mark.verilator


def _toy(**options):
    block = toy_block(**options)
    return block, block.resolve({"stages": "3"})


@compiled
def test_run_gives_every_output_in_order_with_fewer_transactions_than_lanes():
    block, params = _toy()
    txs = block.stimulus(np.random.default_rng(1), 37, **params)
    expected = golden_outputs(block, params, txs)
    stalls = StallPattern(seed=2, p_valid=0.5, p_ready=0.5)
    report = BACKENDS["sliced"].run(
        block, params, txs, expected=expected, stalls=stalls, keep_outputs=True
    )
    assert (report.passed, report.failed, report.lanes_used) == (37, 0, 37)
    in_layout, out_layout = block.layouts(**params)

    assert report.outputs == [layouts.pack(out_layout, out) for out in expected]


@compiled
def test_fp32_add_matches_the_golden_model_under_stalls():
    block = registry.get("fp32_add")
    report = BACKENDS["sliced"].check(block, block.resolve(), count=20_000, seed=9)
    assert (report.passed, report.failed) == (20_000, 0), report.first
    assert report.gates["ands"] > 1000 and report.gates["latches"] > 100


def test_a_cycle_block_is_refused():
    block = registry.get("waitcnt")
    with pytest.raises(registry.RegistryError, match="runs pipeline blocks only"):
        SlicedBackend().check(block, block.resolve(), count=10)


def test_a_session_is_refused():
    block = registry.get("fp32_add")
    with pytest.raises(registry.RegistryError, match="batches only"):
        SlicedBackend().session(block, block.resolve())


def test_a_bad_count_is_refused():
    block = registry.get("fp32_add")
    with pytest.raises(ValueError, match="`count` must be a positive integer, not 0"):
        SlicedBackend().check(block, block.resolve(), count=0)


@compiled  # the command line checks for the compiler and Yosys first
def test_the_command_line_refuses_a_cycle_block_in_one_line(capsys):
    assert cli.main(["check", "waitcnt", "--backend", "sliced"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpurtl: error: the sliced backend runs pipeline blocks only")
    assert "Traceback" not in "\n".join(err)


@compiled
def test_the_command_line_refuses_a_stateful_block_in_one_line(capsys):
    assert cli.main(["check", "ds_bvh_stack", "--backend", "sliced", "--count", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpurtl: error: the outputs of `ds_bvh_stack` depend on")
