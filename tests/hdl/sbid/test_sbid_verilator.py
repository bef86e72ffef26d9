"""The exported Verilog of the token blocks: lint, and ``sbid_mem`` on Verilator through the
generic cocotb test (it holds the token file, so one small build covers both)."""

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry


@pytest.mark.verilator
def test_sbid_mem_on_verilator():
    block = registry.get("sbid_mem")
    params = block.small_params()
    report = BACKENDS["verilator"].check(block, params, count=3000, seed=5)
    assert report.failed == 0, str(report.first)
    assert report.passed == 3000


@pytest.mark.parametrize("name", ["sbid", "sbid_mem"])
def test_exported_verilog_lints_clean(name):
    block = registry.get(name)
    params = block.resolve({"threads": 3, "tokens": 8})
    ok, messages = export.lint(export.to_verilog(block, params), name)
    assert ok, messages
