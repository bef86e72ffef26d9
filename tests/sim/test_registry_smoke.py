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

#: Blocks whose own test file runs them in lockstep on the Amaranth simulator in `make test`
#: (the test named here), so that their run here, which costs seconds of elaboration each, is
#: left to `make test-full`: test file, test function.
OWN_PYSIM_TEST = {
    "ray_triangle": (
        "hdl/ray_accel/test_triangle_engine.py",
        "test_lockstep_pysim_and_watertight_on_rtl",
    ),
    "ray_setup": ("hdl/ray_accel/test_components.py", "test_component_lockstep"),
    "ray_box_engine": ("hdl/ray_accel/test_components.py", "test_component_lockstep"),
    "ray_decode": ("hdl/ray_accel/test_components.py", "test_component_lockstep"),
    "obb_transform": ("hdl/ray_accel/test_obb_transform.py", "test_obb_transform_dual_lanes"),
    "instance_transform": ("hdl/ray_accel/test_obb_transform.py", "test_instance_transform"),
    "matrix_core": ("hdl/matrix/test_core.py", "test_small_build_lockstep_can_fail"),
}


def _pysim_cases():
    for block in registry.blocks():
        marks = [pytest.mark.full] if block.name in OWN_PYSIM_TEST else []
        yield pytest.param(block.name, marks=marks, id=block.name)


@pytest.mark.parametrize("name", list(_pysim_cases()))
def test_block_builds_and_agrees_with_its_golden_model(name):
    block = registry.get(name)
    params = block.small_params()
    report = BACKENDS["pysim"].check(block, params, count=COUNT, seed=5)
    assert report.failed == 0, f"{name} {params}: {report.line()}; first: {report.first}"
    assert report.passed == COUNT


def test_blocks_left_to_the_full_tier_run_on_pysim_in_their_own_test():
    """Every block stays on the Amaranth simulator in `make test`: the test named for it exists,
    is not moved out of the default tier, and names the block."""
    import ast
    from pathlib import Path

    root = Path(__file__).parents[1]
    tiers = {"full", "slow", "verilator"}
    for name, (path, function) in OWN_PYSIM_TEST.items():
        registry.get(name)
        source = (root / path).read_text()
        tree = ast.parse(source)
        found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
        assert found, f"{path} has no {function} (named for {name})"
        marks = {ast.unparse(d).split("(")[0].rsplit(".", 1)[-1] for d in found[0].decorator_list}
        assert not marks & tiers, f"{path}::{function} is marked {marks & tiers}"
        assert f'"{name}"' in source, f"{path} does not name {name}"
        assert "pysim" in source or "run_lockstep" in source, f"{path} does not run pysim"


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
