"""The L0 RTL in a session with the memory hierarchy model behind it."""

import pytest

from gpurtl.golden.memory import Level
from gpurtl.sim.experiments.traversal.memory import HierarchyMemory, run_l0

from ....hdl.rt_unit.compiled import COCOTB


def test_l0_session_with_the_hierarchy_behind_it():
    lines = [(k * 7) % 23 for k in range(40)] + [k % 12 for k in range(30)] + [50, 50, 50, 40, 50]
    levels = [Level("L1", 8 * 1024, 4, 12, 0.5, 8), Level("DRAM", 0, 1, 60, 0.25, 0)]
    memory = HierarchyMemory(levels, make_line=lambda line: line * 1000003)
    result = run_l0(lines, memory=memory, params={"line_bits": 8, "id_bits": 8})
    assert sorted(rid for _, rid, _ in result["responses"]) == list(range(len(lines)))
    for _, rid, data in result["responses"]:
        assert data == lines[rid] * 1000003
    lookups = result["lookups"]
    assert sum(lookups.values()) == len(lines)
    # every L0 miss went to the level below exactly once
    assert result["levels"]["L1"]["accesses"] == lookups["miss"]
    assert lookups["hit"] > 0 and lookups["pending_hit"] > 0 and lookups["miss"] > 30
    # the first miss: requested 2 cycles after it was taken (cycle 0), back 12 + 60 cycles
    # later from DRAM, answered two cycles after the fill
    assert result["responses"][0][0] == 2 + 12 + 60 + 2


@pytest.mark.parametrize("backend", COCOTB)
def test_l0_session_on_compiled_simulators(backend):
    lines = [k % 12 for k in range(40)] + [50, 50, 40, 50]
    levels = [Level("L1", 8 * 1024, 4, 12, 0.5, 8), Level("DRAM", 0, 1, 60, 0.25, 0)]
    memory = HierarchyMemory(levels, make_line=lambda line: line + 1)
    result = run_l0(lines, backend=backend, memory=memory, params={"id_bits": 8})
    assert sorted(rid for _, rid, _ in result["responses"]) == list(range(len(lines)))
    # 14 distinct lines, at most 4 per set of the 4-way default: each misses once
    assert result["lookups"]["miss"] == result["levels"]["L1"]["accesses"] == 14
    assert sum(result["lookups"].values()) == len(lines)
