"""Every registered block, in its small variant: it builds and a short random lockstep run on the
Amaranth simulator agrees with its golden model; in the Verilator tier, its Verilog export lints
clean and the same run agrees on cocotb with Verilator, and on Icarus Verilog (four-state) every
output is defined (no X or Z) in every cycle from the first after reset.

A block added to the registry is covered here without any edit; the thorough checks of each
family live in its own test files.
"""

import shutil

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, ports, registry

#: transactions (pipelines) or cycles (cycle-stepped blocks) of the short lockstep run
COUNT = 24


@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_builds_and_agrees_with_its_golden_model(name):
    block = registry.get(name)
    params = block.small_params()
    report = BACKENDS["pysim"].check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT


def test_small_variants_name_real_parameters():
    for block in registry.blocks():
        for param in block.small:
            block.param(param)  # raises RegistryError for an unknown name


@pytest.mark.verilator
@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_lints_clean_and_agrees_with_its_golden_model_on_verilator(name):
    """One test per block, so its export (Yosys as WebAssembly: minutes for the largest blocks)
    is made once and serves both the lint (``verilator --lint-only -Wall`` with
    :data:`gpurtl.sim.core.export.LINT_WAIVERS`) and the cocotb model."""
    block = registry.get(name)
    params = block.small_params()
    text = export.to_verilog(block, params)
    assert f"module {name}(" in text.replace(" (", "(")
    ok, messages = export.lint(text, name)
    assert ok, f"{name} {params}:\n{messages}"
    report = BACKENDS["verilator"].check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT


@pytest.mark.verilator
@pytest.mark.skipif(
    shutil.which("iverilog") is None or shutil.which("vvp") is None,
    reason="Icarus Verilog is not installed (apt-get install iverilog)",
)
@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_outputs_are_defined_from_reset_on_icarus(name):
    """The file ``gpurtl export`` writes, on Icarus: every combinational block reads the time-0
    trigger, and the icarus backend reads every output port in every cycle (an X or Z raises
    :class:`~gpurtl.sim.harness.engine.UndefinedValue` naming signal and cycle)."""
    block = registry.get(name)
    params = block.small_params()
    text = ports.verilog_file(export.to_verilog(block, params), block, params)
    assert "always @*\n" not in text, "an always @* block that does not read the trigger"
    report = BACKENDS["icarus"].check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT
