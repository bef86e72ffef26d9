"""The provenance every result file carries (:mod:`gpurtl.sim.core.provenance`): version, git
commit with a dirty flag (``unknown`` without git or outside a checkout), command line, seeds,
tool versions and machine, in ``data.json`` and ``summary.md`` (kept by ``gpurtl report``), in
``gpurtl bench --json`` and in every sweep point and report."""

import json
import subprocess
from importlib import metadata

import pytest

from gpurtl.sim.core import provenance
from gpurtl.sim.sweep.run import run_point
from gpurtl.sim.tools.cli import main

TOOLS = {"python", "numpy", "amaranth", "yosys", "verilator", "c++", "iverilog", "cocotb"}


def _git(*argv):
    result = subprocess.run(
        ["git", "-C", str(provenance._ROOT), *argv], capture_output=True, text=True
    )
    return result.stdout.strip() if result.returncode == 0 else None


def check_record(record, command=None, seeds=None):
    assert record["gpurtl"] == metadata.version("gpurtl")
    assert set(record["tools"]) == TOOLS
    assert record["tools"]["amaranth"] == metadata.version("amaranth")
    assert record["machine"]["cores"] >= 1 and record["machine"]["cpu"]
    head = _git("rev-parse", "HEAD")
    if head is not None and _git("rev-parse", "--show-toplevel"):
        assert record["commit"] == head and record["dirty"] in (True, False)
    if command is not None:
        assert record["command"] == command
    if seeds is not None:
        assert record["seeds"] == seeds


def test_the_record_names_versions_commit_tools_and_machine():
    record = provenance.provenance(seeds={"stimulus": 3}, command="gpurtl x")
    check_record(record, "gpurtl x", {"stimulus": 3})
    assert json.loads(json.dumps(record)) == record  # plain JSON data
    text = provenance.markdown(record)
    assert text.startswith("## Provenance") and "stimulus 3" in text and "`gpurtl x`" in text


def test_without_git_or_outside_a_checkout_the_commit_is_unknown(monkeypatch, tmp_path):
    provenance.git_commit.cache_clear()
    try:
        monkeypatch.setenv("PATH", str(tmp_path))  # no git
        assert provenance.git_commit() == {"commit": "unknown", "dirty": None}
        provenance.git_commit.cache_clear()
        monkeypatch.undo()
        (tmp_path / "sim").mkdir()
        (tmp_path / "pyproject.toml").write_text("")
        monkeypatch.setattr(provenance, "_ROOT", tmp_path)  # a copy that is no checkout
        assert provenance.git_commit() == {"commit": "unknown", "dirty": None}
    finally:
        provenance.git_commit.cache_clear()


def test_tool_versions_and_the_commit_are_asked_once_per_process(monkeypatch):
    provenance.provenance()

    def no_process(*args, **kwargs):
        raise AssertionError("a version query ran again")

    monkeypatch.setattr(subprocess, "run", no_process)
    assert set(provenance.provenance()["tools"]) == TOOLS


def test_ooo_memory_data_and_summary_carry_it_and_report_keeps_it(tmp_path, capsys):
    argv = ["experiment", "ooo-memory", "--quick", "--out", str(tmp_path)]
    assert main(argv) == 0, capsys.readouterr().err
    folder = tmp_path / "ooo-memory"
    record = json.loads((folder / "data.json").read_text())["provenance"]
    check_record(record, "gpurtl " + " ".join(argv), seeds={})
    summary = (folder / "summary.md").read_text()
    assert "## Provenance" in summary and record["commit"] in summary
    assert "none (no random numbers)" in summary and record["date"] in summary
    (folder / "summary.md").unlink()
    assert main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert json.loads((folder / "data.json").read_text())["provenance"] == record
    assert (folder / "summary.md").read_text() == summary  # the measuring run's record


def test_bench_json_carries_it(capsys, monkeypatch):
    from gpurtl.sim.tools import bench

    def fake_bench(block, params, *, seed, **kwargs):
        return {"block": block.name, "params": params, "rows": []}

    monkeypatch.setattr(bench, "bench", fake_bench)
    assert main(["bench", "fp32_add", "--backends", "pysim", "--seed", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    check_record(
        result["provenance"],
        "gpurtl bench fp32_add --backends pysim --seed 4 --json",
        {"stimulus": 4},
    )


def test_a_sweep_point_carries_it():
    result = run_point(
        "check", "fp32_cmp", {"stages": 1}, {"count": 4, "seed": 6, "backend": "pysim"}
    )
    assert result["status"] == "ok"
    check_record(result["provenance"], seeds={"seed": 6})


@pytest.mark.parametrize("name", ["ooo-memory", "matrix", "stoc", "obb", "traversal"])
def test_experiments_declare_their_seeds(name):
    from gpurtl.sim import experiments

    assert isinstance(experiments.get(name).SEEDS, dict)
