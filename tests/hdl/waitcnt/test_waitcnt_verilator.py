"""The exported Verilog of the wait counters, on Verilator through the generic cocotb test."""

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_waitcnt_mem_on_verilator():
    block = registry.get("waitcnt_mem")
    params = block.resolve(
        {"waves": 4, "queue": "inorder", "queue_depth": 4, "hit_latency": 3, "miss_latency": 11}
    )
    report = BACKENDS["verilator"].check(block, params, count=3000, seed=5)
    assert report.failed == 0, str(report.first)
    assert report.passed == 3000


@pytest.mark.parametrize("name", ["waitcnt", "waitcnt_mem"])
def test_exported_verilog_lints_clean(name):
    block = registry.get(name)
    params = block.resolve({"waves": 4})
    ok, messages = export.lint(export.to_verilog(block, params), name)
    assert ok, messages
