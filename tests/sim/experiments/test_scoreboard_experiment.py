"""`gpurtl experiment scoreboard`: the claims it makes, on small runs of the RTL.

Expected values come from the workload's arithmetic and the sources, not from the experiment:
an in-order return queue gives wave X exactly U accesses per wave Y access; a thread never has
more loads in flight than its tokens (16 on Xe2 in 128-GRF mode, 32 on Xe3); a 6-bit counter
holds 63.
"""

import json
from importlib import metadata

import pytest

from gpurtl.sim import experiments
from gpurtl.sim.experiments import scoreboard

DESIGNS = {d.key: d for d in scoreboard.DESIGNS}
FAST = {"y_accesses": 3, "hit_latency": 3, "miss_latency": 40}


def test_the_false_dependency_is_rdna3s_only():
    rows = {key: scoreboard.cross_wave(d, 4, **FAST) for key, d in DESIGNS.items()}
    assert rows["rdna3"]["ratio"] == 4.0  # X's hits return behind Y's miss: U per Y access
    for key in ("rdna4", "xe2", "xe3"):
        assert rows[key]["ratio"] > 2 * 4, (key, rows[key])
        assert rows[key]["x_load_refused_cycles"] == 0
    assert rows["rdna3"]["x_wait_stall_cycles"] > rows["xe3"]["x_wait_stall_cycles"]


def test_tokens_bound_the_loads_in_flight_xe2_against_xe3():
    # wave X's 32 misses: one round of latency on Xe3, two on Xe2 (over 8 Y accesses)
    xe2 = scoreboard.cross_wave(DESIGNS["xe2"], 32, x_hit=0, **{**FAST, "y_accesses": 9})
    xe3 = scoreboard.cross_wave(DESIGNS["xe3"], 32, x_hit=0, **{**FAST, "y_accesses": 9})
    assert xe2["x_peak"] == 16 and xe3["x_peak"] == 32
    assert xe2["x_load_refused_cycles"] > 0 and xe3["x_load_refused_cycles"] == 0
    assert xe2["ratio"] < xe3["ratio"]


@pytest.mark.parametrize(
    "key, tokens, waves, expected",
    [("rdna4", None, 1, (63, 63)), ("xe2", 16, 3, (16, 48)), ("xe3", 32, 2, (32, 64))],
)
def test_flood_reaches_the_limit_of_the_sources(key, tokens, waves, expected):
    design = DESIGNS[key]
    assert scoreboard.flood(design, waves) == expected


@pytest.mark.slow  # a minute of simulation
def test_quick_run_writes_its_report(tmp_path):
    result = experiments.run(scoreboard, tmp_path, quick=True)
    names = {p.rsplit("/", 1)[-1] for p in result["files"]}
    assert {"scoreboard.csv", "scoreboard_limits.csv", "scoreboard.png", "summary.md"} <= names
    data = json.loads((tmp_path / "data.json").read_text())
    assert data["backend"].startswith("pysim")
    prov = data["provenance"]
    assert prov["gpurtl"] == metadata.version("gpurtl") and prov["commit"]
    assert prov["seeds"] == scoreboard.SEEDS == {} and prov["tools"]["amaranth"]
    assert {r["per_simd"] for r in data["limits"] if r["key"] == "xe3"} == {320}
