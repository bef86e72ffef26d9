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


def _data_experiments():
    from gpurtl.sim import experiments

    found = experiments.experiments()
    return sorted(n for n, m in found.items() if hasattr(m, "measure") and hasattr(m, "report"))


@pytest.mark.parametrize("name", _data_experiments())
def test_every_experiment_declares_its_seeds_and_its_data_carries_the_record(name):
    """The record :func:`gpurtl.sim.experiments.run` adds to each experiment's ``data.json``
    (the quick runs themselves are the experiments' own, slow, tests)."""
    from gpurtl.sim import experiments

    module = experiments.get(name)
    assert isinstance(module.SEEDS, dict)
    check_record(experiments.run_provenance(module), seeds=module.SEEDS)
    # No experiment keeps a record of its own: data.json's "provenance" is the common one.
    assert not hasattr(module, "_provenance") and not hasattr(module, "_git")


def _amaranths_yosys():
    """The Yosys Amaranth itself picks, as the identity :func:`export._yosys_identity` gives:
    the independent reference (Amaranth's own finder; the package does not import it)."""
    from amaranth._toolchain.yosys import YosysError, find_yosys

    try:
        proxy = find_yosys(lambda version: version >= (0, 40))
    except YosysError as error:
        return f"none ({error})"
    return f"{proxy.__name__} {proxy.version()}"


@pytest.mark.parametrize(
    "clauses",
    [None, "builtin", "system", "system,builtin", "builtin,system", "bogus", "javascript"],
)
@pytest.mark.parametrize("system", ["none", "0.45+12", "0.9", "fails"])
def test_the_yosys_identity_is_the_one_amaranth_runs(clauses, system, monkeypatch, tmp_path):
    """Through public routes only (``AMARANTH_USE_YOSYS``, the wheel's metadata, ``yosys -V``),
    the same Yosys and the same message as Amaranth's own finder, with a system Yosys that is
    missing, new enough, too old or broken."""
    from gpurtl.sim.core import export

    if clauses is None:
        monkeypatch.delenv("AMARANTH_USE_YOSYS", raising=False)
    else:
        monkeypatch.setenv("AMARANTH_USE_YOSYS", clauses)
    monkeypatch.delenv("YOSYS", raising=False)
    if system != "none":
        tool = tmp_path / "yosys"
        body = "echo boom >&2; exit 1" if system == "fails" else f"echo 'Yosys {system} (git)'"
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    export._yosys_identity.cache_clear()
    try:
        assert export._yosys_identity() == _amaranths_yosys()
    finally:
        export._yosys_identity.cache_clear()
