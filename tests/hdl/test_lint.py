"""Every registered block's Verilog export, at its small parameters (``small_params()``), lints
clean with ``verilator --lint-only -Wall`` and the waivers of
:data:`gpurtl.sim.core.export.LINT_WAIVERS`; and the lint does report a warning that is not waived.

The exports are cached by source (the registry smoke test writes the same ones), so the lint
itself is what this costs: about a minute of CPU for all blocks, a third of it the two triangle
blocks."""

import pytest

from gpurtl.sim.core import export, registry

_CONSTANT_COMPARE = """module cmp(input [7:0] a, output y);
  assign y = a < 8'h0;
endmodule
"""


@pytest.mark.parametrize("name", [block.name for block in registry.blocks()])
def test_export_lints_clean(name):
    block = registry.get(name)
    text = export.to_verilog(block, block.small_params())
    ok, messages = export.lint(text, name)
    assert ok, f"{name} {block.small_params()}:\n{messages}"


def test_lint_reports_a_comparison_that_is_constant():
    ok, messages = export.lint(_CONSTANT_COMPARE, "cmp")
    assert not ok
    assert "UNSIGNED" in messages
