"""The instruction-prefetch experiment: its front end against hand-worked cases, the cliff where
code outgrows the cache, the Intel Gen-like cliffs, and the report written from data.json."""

import json
from importlib import metadata

import numpy as np
import pytest

from gpurtl.sim import experiments
from gpurtl.sim.experiments import inst_prefetch as ip


def straight(kb, inst_bytes=None):
    return ip.Kernel(kb * 1024, False, None, 64, inst_bytes=inst_bytes)


def test_code_that_fits_has_no_steady_stall_and_code_twice_the_cache_stalls():
    fits = ip.simulate(straight(16), "none")
    over = ip.simulate(straight(64), "none")
    assert fits["stall_per_inst"] == 0 and fits["issue_loss_per_inst"] == 0
    assert fits["line_requests"] == 128  # each line once: the first wave's cold misses
    assert over["stall_per_inst"] > 1.0
    # A cold miss misses the L1 too and hits the warmed L2: 80 + 100 cycles for a line of
    # 128 / 5.6 instructions.
    assert fits["cold_stall_per_inst"] == pytest.approx(180 / (128 / 5.6), rel=1e-6)


def test_entry_prefetch_hides_the_first_waves_misses_up_to_its_size():
    none = ip.simulate(straight(8), "none")
    rdna3 = ip.simulate(straight(8), "rdna3")
    assert rdna3["cold_stall_per_inst"] < none["cold_stall_per_inst"] / 5


def test_the_gen_like_cliffs_sit_at_48_and_128_kb_of_16_byte_instructions():
    rows = []
    for count in (2800, 3000, 3300, 7800, 8000, 8400):
        kernel = ip.Kernel(count * 16, False, None, 64, inst_bytes=16)
        rows.append((count, ip.simulate(kernel, "none", size=48 * 1024, l1=128 * 1024)))
    assert ip.cliffs(rows) == [(3000, 3300), (8000, 8400)]


def test_branchy_kernels_take_one_side_per_wave_and_software_prefetch_adds_two_instructions():
    kernel = ip.Kernel(16 * 1024, True, np.random.default_rng(1), 8)
    lines = {line for path in kernel.paths for line, _ in path}
    assert lines == set(range(kernel.lines))  # the waves together run every line
    assert all(len(path) < kernel.lines for path in kernel.paths)
    base = kernel.instructions(0, False)
    assert kernel.instructions(0, True) == base + 2 * len(kernel.regions)


def test_cliffs_finds_each_run_of_steep_steps():
    rows = [(x, {"stall_per_inst": v}) for x, v in [(1, 0), (2, 0), (3, 1), (4, 2), (5, 2), (6, 3)]]
    assert ip.cliffs(rows) == [(2, 3), (5, 6)]


def test_quick_run_writes_report_and_provenance(tmp_path):
    result = experiments.run(ip, tmp_path, quick=True)
    data = json.loads((tmp_path / experiments.DATA).read_text())
    assert data["seeds"] == [ip.START_SEEDS[0]] and data["kernel_seed"] == ip.SEED
    prov = data["provenance"]
    assert prov["gpurtl"] == metadata.version("gpurtl") and prov["commit"]
    assert prov["seeds"] == ip.SEEDS and prov["tools"]["numpy"] == np.__version__
    assert {r["config"] for r in data["rows"]} == set(ip.CONFIGS)
    rtl = {r["config"]: r for r in data["rtl"]["rows"]}
    assert set(rtl) == set(ip.RTL_CONFIGS) and all(
        r["cycles_compared"] > 1000 for r in rtl.values()
    )
    # Prefetch takes the RTL's cold misses; once warm, every fetch hits.
    assert rtl["entry 16 lines"]["cycles_cold"] < rtl["none"]["cycles_cold"] / 2
    assert all(r["warm_stall_per_inst"] == 0 for r in rtl.values())
    names = {p.rsplit("/", 1)[-1] for p in result["files"]}
    assert {"inst_prefetch.csv", "inst_prefetch.png", "summary.md", "data.json"} <= names
    again = experiments.report(ip, tmp_path / "again", data_dir=tmp_path)
    assert again["rows"] == result["rows"]


def _cycle_model_requests(lines, distance, **geometry):
    """The lines the ``icache`` golden model asks memory for when ``lines`` are fetched one
    after the other (each answered before the next, with idle cycles between for prefetch)."""
    from gpurtl.facts.inst_prefetch import ICacheGeometry
    from gpurtl.golden.icache import ICacheModel

    model = ICacheModel(ICacheGeometry(**geometry))
    due, requested = [], []

    def step(fetch=None):
        fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
        if due:
            fill = {"valid": 1, "payload": {"line": due[0], "data": 0}}
        out = model.step(
            {
                "fetch": {"valid": int(fetch is not None), "payload": {"pc": (fetch or 0) << 7}},
                "resp": {"ready": 1},
                "start": {"valid": 0, "payload": {"line": 0, "lines": 0}},
                "pf": {"valid": 0, "payload": {"line": 0, "count": 0}},
                "distance": distance,
                "mem_req": {"ready": 1},
                "fill": fill,
            }
        )
        if fill["valid"] and out["fill"]["ready"]:
            due.pop(0)
        if out["mem_req"]["valid"]:
            requested.append(out["mem_req"]["payload"]["line"])
            due.append(out["mem_req"]["payload"]["line"])
        return out

    for line in lines:
        while not step(line)["fetch"]["ready"]:
            pass
        for _ in range(12):
            step()
    return requested


@pytest.mark.parametrize("distance", [0, 2])
def test_the_experiments_cache_asks_for_the_lines_the_block_asks_for(distance):
    """One wave's line sequence (straight code three times round a 1 KB cache, then some
    jumps) through the experiment's front end and through the block's cycle-stepped golden
    model: the same lines requested from memory, in the same order."""
    lines = list(range(12)) * 3 + [3, 40, 41, 7, 40, 2]
    expected = _cycle_model_requests(lines, distance, size=1024, ways=2, line_bits=8)
    fe = ip.FrontEnd(1024, 2, 0, distance, False, 128 * 1024, 1 << 8)
    got, t = [], 0.0
    fe.memory.access = lambda line, when, level=0: (got.append(line), when + 5)[1]
    for line in lines:
        t = fe.fetch(line, t) + 20
        for ahead in range(1, distance + 1):
            fe.prefetch(line + ahead, t - 20)
    assert got == expected and len(expected) > 20
