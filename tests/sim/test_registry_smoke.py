"""Every registered block, in its small variant: it builds and a short random lockstep run on the
Amaranth simulator agrees with its golden model; in the Verilator tier, its Verilog export lints
clean.

A block added to the registry is covered here without any edit; the thorough checks of each
family live in its own test files.
"""

import pytest

from gpurtl.sim import export, lockstep, registry

#: transactions (pipelines) or cycles (cycle-stepped blocks) of the short lockstep run
COUNT = 24


@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_builds_and_agrees_with_its_golden_model(name):
    block = registry.get(name)
    params = block.small_params()
    report = lockstep.check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT


@pytest.mark.verilator
@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_exports_verilog_that_lints_clean(name):
    """``verilator --lint-only -Wall`` with :data:`gpurtl.sim.export.LINT_WAIVERS`. In the
    Verilator tier: the export itself (Yosys as WebAssembly) costs minutes for the largest
    blocks, and that tier exports every block for cocotb anyway (the export is cached)."""
    block = registry.get(name)
    params = block.small_params()
    text = export.to_verilog(block, params)
    assert f"module {name}(" in text.replace(" (", "(")
    ok, messages = export.lint(text, name)
    assert ok, f"{name} {params}:\n{messages}"


def test_small_variants_name_real_parameters():
    for block in registry.blocks():
        for param in block.small:
            block.param(param)  # raises RegistryError for an unknown name
