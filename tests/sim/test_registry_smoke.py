"""Every registered block, in its small variant: it builds and a short random lockstep run on the
Amaranth simulator agrees with its golden model; in the Verilator tier, its Verilog export lints
clean and the same run agrees on cocotb with Verilator.

A block added to the registry is covered here without any edit; the thorough checks of each
family live in its own test files.
"""

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry

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
