"""The lint (``verilator --lint-only -Wall`` with :data:`gpurtl.sim.core.export.LINT_WAIVERS`)
reports a warning that is not waived. Every registered block's export is linted by the registry
smoke test (``tests/sim/test_registry_smoke.py``, Verilator tier)."""

from gpurtl.sim.core import export

_CONSTANT_COMPARE = """module cmp(input [7:0] a, output y);
  assign y = a < 8'h0;
endmodule
"""


def test_lint_reports_a_comparison_that_is_constant():
    ok, messages = export.lint(_CONSTANT_COMPARE, "cmp")
    assert not ok
    assert "UNSIGNED" in messages
