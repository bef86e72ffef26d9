"""``gpurtl bench``: every backend on the same stimulus, compared with the golden model."""

import json

import pytest

from gpurtl.sim.bench import bench, format_table
from gpurtl.sim.cli import main
from gpurtl.sim.core import registry


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


def test_bench_refuses_unknown_backend_and_cycle_blocks(capsys):
    assert main(["bench", "fp32_add", "--backends", "fastest"]) == 2
    assert "backend must be one of" in capsys.readouterr().err
    assert main(["bench", "waitcnt"]) == 2
    assert "pipeline blocks" in capsys.readouterr().err


@pytest.mark.verilator
def test_session_bench_rows():
    from gpurtl.sim.bench import bench_sessions, format_session_table

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
