"""``gpurtl experiment traversal-rtl-sensitivity`` (sim/experiments/traversal/sensitivity.py):
the rows and options, the paired effects and the report from stored rows; (verilator, slow) the
default row on the RTL through the compiled player with 0 mismatches."""

import json

import numpy as np
import pytest

from gpurtl.sim.core import registry
from gpurtl.sim.experiments.traversal import sensitivity as S
from gpurtl.sim.experiments.traversal.frame import ENGINES
from gpurtl.sim.tools.cli import main


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--rays", "0"), "--rays must be a positive whole number, not '0'"),
        (("--workers", "two"), "--workers must be a positive whole number, not 'two'"),
        (("--rows", "mshrs-8,nope"), "--rows: unknown row 'nope'; the rows are default, "),
        (("--scheduler", " "), "--scheduler must be a Dask scheduler's address"),
    ],
)
def test_mistakes_exit_2(tmp_path, capsys, argv, message):
    code = main(["experiment", "traversal-rtl-sensitivity", *argv, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "traversal-rtl-sensitivity").exists()


def test_every_row_is_a_valid_rdna4_build_with_its_one_change():
    base = registry.get("rt_unit").resolve(S.BASE)
    assert list(S.ROWS)[0] == "default" and S.ROWS["default"][1] == {}
    for name, (_, changes, mode) in S.ROWS.items():
        rt = registry.get("rt_unit").resolve(dict(S.BASE, **changes))
        assert {k for k in rt if rt[k] != base[k]} == set(changes), name
        # BVH4x2 nodes need the dual node fetch
        assert mode == "bvh8" or rt["dual"], name
    assert S.ROWS["bvh4x2"][1] == S.ROWS["dual-build"][1]  # the nodes alone differ
    assert S._rows("plru,default,plru") == ["default", "plru"]


def _stored(name, cycles, batches):
    return {
        "name": name, "rays": 3200, "instructions": 10, "lane_instructions": 100,
        "mismatches": 0, "cycles": cycles, "lookups": {"hit": 8, "pending_hit": 1, "miss": 1},
        "refused": {"full": 0, "other": cycles // 4}, "busy": cycles // 2,
        "in_flight": {"max": 9, "mean": 3.5}, "player_cpu_seconds": 1.0,
        "player_build_seconds": 0.0, "program_cpu_seconds": 1.0, "box_tests": 5,
        "tri_tests": 1, "first_mismatches": [], "cpu_seconds": 2.0,
        "wall_seconds": 2.0,
        "steady": {"rays_per_kcycle": [float(np.mean(batches)), 0.1], "batches": batches,
                   "waves": 80, "window": [10, 900]},
    }  # fmt: skip


def test_resumed_rows_are_not_run_and_effects_are_paired(tmp_path):
    """Rows found in the store are read, not run (no RTL here); a row's effect is the mean of its
    per-batch differences from the default's, with their 95% t-interval."""
    base = [10.0 + k for k in range(10)]  # the waves' own spread: large
    slower = [b - 1.0 - 0.1 * (k % 2) for k, b in enumerate(base)]  # a steady 1.05 fewer
    rows = {"default": (1000, base), "mshrs-8": (1100, slower)}
    for name, (cycles, batches) in rows.items():
        rt = registry.get("rt_unit").resolve(dict(S.BASE, **S.ROWS[name][1]))
        key = S._key(name, rt, 3200, "camera", "terrain")
        (tmp_path / f"row-{key}.json").write_text(json.dumps(_stored(name, cycles, batches)))
    data = S.measure(rays=3200, rows="mshrs-8", resume=True, store=tmp_path)
    assert data["ran"] == 0 and data["mismatches"] == 0
    default, row = data["rows"]
    assert default["name"] == "default" and "effect" not in default
    diffs = np.subtract(slower, base)
    assert diffs.mean() == pytest.approx(-1.05) and row["effect"][0] == pytest.approx(-1.05)
    half = 2.262 * diffs.std(ddof=1) / np.sqrt(10)
    assert row["effect"][1] == pytest.approx(half, rel=1e-3)
    assert row["effect_percent"][0] == pytest.approx(-105.0 / np.mean(base))
    assert row["l0_hit_percent"] == 80.0 and row["refused_percent"] == 25.0
    out = S.report(data, tmp_path / "out")
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "| 8 MSHRs | `mshrs=8` | 1100 |" in text and "beyond its interval" in text
    assert (tmp_path / "out" / "rows.csv").read_text().count("\n") == 3
    assert out["rows"][0][0] == "rdna4 build"


@pytest.mark.verilator
@pytest.mark.slow  # the RDNA 4-size player model: minutes of compiler time where not cached
@pytest.mark.skipif("player" not in ENGINES, reason="no compiled player in this installation")
def test_the_default_row_on_the_rtl(tmp_path):
    data = S.measure(rays=2048, rows="default", rtl_scene="bunny", workers=1, store=tmp_path)
    (row,) = data["rows"]
    assert row["mismatches"] == 0 and row["rays"] == 2048 and row["cycles"] > 0
    assert row["rt_unit"] == registry.get("rt_unit").resolve({"preset": "rdna4"})
    s = row["steady"]  # 64 waves: 50 in the window, batches of 5
    assert s is not None and len(s["batches"]) == 10 and s["rays_per_kcycle"][0] > 0
    assert 0 < row["l0_hit_percent"] <= 100 and data["instructions"] > 0
    assert list(tmp_path.glob("row-*.json"))  # stored as it finished
