"""``gpurtl bench``: every backend on the same stimulus, compared with the golden model."""

import json

import pytest

from gpurtl.sim.core import registry
from gpurtl.sim.core.registry import RegistryError
from gpurtl.sim.tools.bench import bench, format_table
from gpurtl.sim.tools.cli import main


@pytest.mark.verilator
def test_bench_rows_and_table():
    block = registry.get("fp32_add")
    result = bench(
        block,
        block.resolve(),
        count=4000,
        slow_count=150,
        backends=["pysim", "fast-stalled", "fast-batch"],
    )
    rows = {row["backend"]: row for row in result["rows"]}
    assert list(rows) == ["pysim", "fast-stalled", "fast-batch"]
    assert rows["pysim"]["transactions"] == 150
    for name, row in rows.items():
        assert (row["passed"], row["failed"]) == (row["transactions"], 0), name
        assert row["cycles"] > row["transactions"] and row["instructions_per_s"] > 0
    assert result["golden_transactions"] == 4000
    table = format_table(result)
    assert "instructions/s" in table and "fast-batch" in table


@pytest.mark.verilator
def test_bench_cli_json(capsys):
    assert main(["bench", "fp32_add", "--backends", "fast-batch", "--count", "1000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["rows"][0]["backend"] == "fast-batch"
    assert result["rows"][0]["passed"] == 1000


def test_bench_refuses_unknown_backend_and_a_batch_top_for_cycle_blocks(capsys):
    assert main(["bench", "fp32_add", "--backends", "fastest"]) == 2
    assert "backend must be one of" in capsys.readouterr().err
    assert main(["bench", "waitcnt", "--backends", "fast-batch"]) == 2
    assert "cycle-stepped: it runs as the block itself (fast-stalled)" in capsys.readouterr().err


@pytest.mark.verilator
def test_bench_of_a_cycle_block(capsys):
    argv = ["bench", "waitcnt", "-p", "waves=4", "--count", "3000", "--slow-count", "200"]
    assert main([*argv, "--backends", "pysim,fast-stalled", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["backend"], r["transactions"], r["cycles"]) for r in rows] == [
        ("pysim", 200, 200),
        ("fast-stalled", 3000, 3000),
    ]
    assert all(r["passed"] == r["transactions"] and r["failed"] == 0 for r in rows)


@pytest.mark.verilator
def test_session_bench_rows():
    from gpurtl.sim.tools.bench import bench_sessions, format_session_table

    block = registry.get("fp32_add")
    result = bench_sessions(block, block.resolve(), count=600, batches=(1, 32), repeat=1)
    assert result["batch"]["failed"] == 0
    rows = [(row["batch"], row["mode"]) for row in result["rows"]]
    assert rows == [(1, "closed"), (1, "streamed"), (32, "closed"), (32, "streamed")]
    for row in result["rows"]:
        assert row["transactions"] == 600 and row["vs_batch"] > 0
    # a closed loop of single transactions waits out the latency each time
    assert result["rows"][0]["cycles"] > 600 * 9
    assert "vs batch run" in format_session_table(result)


def test_ray_accel_bench_adds_the_box_only_build(monkeypatch):
    """The compiled rows run again on the box-only build (``triangles=0 transforms=0``), each
    with its golden outputs; the Python-per-cycle rows do not. A stand-in backend records what it
    was asked to run (no model is built)."""
    import numpy as np

    from gpurtl.sim.harness.report import Report
    from gpurtl.sim.tools import bench as bench_module
    from gpurtl.sim.tools.bench import box_only_params

    calls = []

    class Recording:
        python_per_cycle = False

        def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant, work):
            calls.append((variant, dict(params), np.array(in_rows), np.array(expected_rows)))
            report = Report()
            report.passed, report.cycles = len(in_rows), 3 * len(in_rows)
            return report, 0.0, 0.5, 0.25

    class Python(Recording):
        python_per_cycle = True

    monkeypatch.setattr(
        bench_module, "BENCH_ROWS", {"compiled": (Recording(), "a"), "python": (Python(), None)}
    )
    block = registry.get("ray_accel")
    params = block.resolve({"engines": "1", "boxes_per_engine": "1", "transforms": "0"})
    assert box_only_params(block, block.resolve(block.small)) is None
    assert box_only_params(registry.get("fp32_add"), registry.get("fp32_add").resolve()) is None
    result = bench(block, params, count=60, slow_count=20, backends=["python", "compiled"])
    rows = [(r["backend"], r["build"], r["transactions"]) for r in result["rows"]]
    assert rows == [
        ("python", "asked", 20),
        ("compiled", "asked", 60),
        ("compiled", "box-only", 60),
    ]
    assert [call[1]["triangles"] for call in calls] == [True, True, False]
    assert calls[2][1] == {**params, "triangles": False}
    # the same instructions, the golden outputs of each build (triangle nodes differ)
    assert (calls[1][2] == calls[2][2]).all() and not (calls[1][3] == calls[2][3]).all()
    assert result["rows"][2]["box_tests_per_cpu_s"] == 8 * 60 / 0.25
    table = format_table(result)
    assert "box tests/CPU-s" in table and "box-only" in table and "triangles=False" in table


def test_repeat_keeps_the_run_of_median_cpu_time_taken_in_turn(monkeypatch):
    """With ``repeat=3`` each compiled row runs three times, alternating between the rows, and
    shows the run of median CPU time; the Python-per-cycle row runs once; a mismatch wins."""
    from gpurtl.sim.harness.report import Report
    from gpurtl.sim.tools import bench as bench_module

    order = []

    class Timed:
        python_per_cycle = False

        def __init__(self, name, cpu_seconds, failing=()):
            self.name, self.cpu, self.failing = name, list(cpu_seconds), set(failing)

        def timed_run(self, block, params, in_rows, expected_rows, stalls, *, variant, work):
            order.append(self.name)
            report = Report()
            run = sum(1 for name in order if name == self.name) - 1
            report.passed, report.cycles = len(in_rows), len(in_rows)
            if run in self.failing:
                report.passed, report.failed = len(in_rows) - 1, 1
            return report, 7.0 if run == 0 else 0.0, 1.0, self.cpu[run]

    class Python(Timed):
        python_per_cycle = True

    monkeypatch.setattr(
        bench_module,
        "BENCH_ROWS",
        {
            "a": (Timed("a", [3.0, 1.0, 2.0]), "x"),
            "b": (Timed("b", [5.0, 4.0, 6.0], failing={2}), "x"),
            "py": (Python("py", [9.0]), None),
        },
    )
    block = registry.get("fp32_add")
    result = bench(
        block, block.resolve(), count=40, slow_count=20, backends=["py", "a", "b"], repeat=3
    )
    assert order == ["py", "a", "b", "a", "b", "a", "b"]
    rows = {r["backend"]: r for r in result["rows"]}
    assert (rows["a"]["sim_cpu_seconds"], rows["a"]["runs"]) == (2.0, 3)
    assert rows["a"]["build_seconds"] == 7.0  # the first run's, which built the model
    assert (rows["b"]["sim_cpu_seconds"], rows["b"]["failed"]) == (6.0, 1)
    assert (rows["py"]["sim_cpu_seconds"], rows["py"]["runs"]) == (9.0, 1)
    assert "median sim CPU s of 3" in format_table(result)
    with pytest.raises(RegistryError, match="`repeat` must be a positive integer"):
        bench(block, block.resolve(), backends=["a"], repeat=0)
