"""Every registered block, in its small variant: it builds, exports to Verilog, and a short random
lockstep run agrees with its golden model on the Amaranth simulator and, in the Verilator tier, on
cocotb with Verilator.

A block added to the registry is covered here without any edit; the thorough checks of each
family live in its own test files.
"""

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry

#: transactions (pipelines) or cycles (cycle-stepped blocks) of the short lockstep run
COUNT = 24


@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_builds_exports_and_agrees_with_its_golden_model(name):
    block = registry.get(name)
    params = block.small_params()
    text = export.to_verilog(block, params)
    assert f"module {name}(" in text.replace(" (", "(")
    report = BACKENDS["pysim"].check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT


def test_small_variants_name_real_parameters():
    for block in registry.blocks():
        for param in block.small:
            block.param(param)  # raises RegistryError for an unknown name


@pytest.mark.verilator
@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_block_agrees_with_its_golden_model_on_verilator(name):
    block = registry.get(name)
    params = block.small_params()
    report = BACKENDS["verilator"].check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT
