"""`gpurtl experiment`, `demo` and `report`: every experiment keeps its measured data as
`data.json`, and `gpurtl report DIR` writes the same tables again from it without measuring."""

import json
import types
from pathlib import Path

import pytest

from gpurtl.sim import experiments
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.harness.report import Report
from gpurtl.sim.tools.cli import main
from gpurtl.sim.tools.tables import Column, document, markdown, write_csv


def _toy_experiment(calls):
    """An experiment with a table, a CSV file and headline rows; ``calls`` counts measurements."""

    def measure(*, quick=False, progress=None, **params):
        calls.append(quick)
        return {"rows": [{"size": 1 << k, "cycles": 1000 * 3**k} for k in range(4)]}

    def report(data, out_dir):
        columns = [Column("size"), Column("cycles", unit="cycles")]
        files = [
            write_csv(out_dir / "toy.csv", data["rows"], columns),
            document(out_dir / "summary.md", "toy", markdown(data["rows"], columns)),
        ]
        return {"title": "toy", "rows": [("largest", data["rows"][-1]["cycles"])], "files": files}

    return types.SimpleNamespace(
        NAME="toy", DESCRIPTION="a toy experiment", measure=measure, report=report
    )


@pytest.fixture
def toy(monkeypatch):
    calls = []
    module = _toy_experiment(calls)
    monkeypatch.setattr(experiments, "experiments", lambda: {"toy": module})

    def fake_check(block, params, *, count, seed, vcd):
        Path(vcd).write_text("$enddefinitions $end\n")
        report = Report()
        report.passed = count
        return report

    monkeypatch.setattr(BACKENDS["pysim"], "check", fake_check)
    return calls


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_then_report_writes_the_same_files_without_measuring(tmp_path, capsys, toy):
    out = tmp_path / "demo"
    code, stdout, err = run(capsys, "demo", "--quick", "--out", out)
    assert code == 0, err
    assert toy == [True]
    assert json.loads((out / "toy" / "data.json").read_text())["rows"][3]["cycles"] == 27000
    summary = (out / "summary.md").read_text()
    assert "| toy | largest | 27,000 |" in summary and f"gpurtl report {out}" in summary
    table = (out / "toy" / "summary.md").read_text()
    assert "| size | cycles (cycles) |" in table and "| 8 | 27,000 |" in table
    written = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix != ".vcd"}
    for path in written:
        if path.suffix in (".md", ".csv"):
            path.unlink()
    code, again, err = run(capsys, "report", out)
    assert code == 0, err
    assert toy == [True]  # not measured again
    assert {p: p.read_bytes() for p in written} == written
    assert "## toy: toy" in again and "largest: 27000" in again
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_report_of_one_experiment_folder(tmp_path, capsys, toy):
    code, _, err = run(capsys, "experiment", "toy", "--out", tmp_path)
    assert code == 0, err
    (tmp_path / "toy" / "toy.csv").unlink()
    code, out, err = run(capsys, "report", tmp_path / "toy")
    assert code == 0, err
    assert (tmp_path / "toy" / "toy.csv").read_text().splitlines()[-1] == "8,27000"
    assert toy == [False]


def test_report_without_data_is_one_error_line(tmp_path, capsys, toy):
    for folder, message in [
        (tmp_path, "holds no data.json and no experiment folder with one"),
        (tmp_path / "missing", "must be a folder written by `gpurtl demo`"),
    ]:
        code, _, err = run(capsys, "report", folder)
        assert code == 2 and message in err, err
        assert "Traceback" not in err and err.count("\n") == 1, err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.json").write_text("{}")
    code, _, err = run(capsys, "report", tmp_path / "other")
    assert code == 2 and "the folder's name must be an experiment's (toy)" in err, err


def test_data_that_is_not_json_is_refused(tmp_path):
    module = _toy_experiment([])
    module.measure = lambda **kw: {(1, 2): "a tuple key"}
    with pytest.raises(TypeError):
        experiments.run(module, tmp_path)
    assert not (tmp_path / "data.json").exists()


def test_experiments_measure_and_report():
    found = experiments.experiments()
    for name in ("dynvgpr-deadlock", "fp32-synth", "obb", "occupancy", "ooo-memory", "stoc"):
        assert callable(found[name].measure) and callable(found[name].report), name
        assert not hasattr(found[name], "run"), name  # experiments.run serves them all
    for name, module in found.items():
        assert hasattr(module, "measure") == hasattr(module, "report"), name
        assert module.DESCRIPTION, name


def test_sweep_points_call_measure_with_the_points_parameters(tmp_path):
    from gpurtl.sim.sweep import SpecError, load_spec, run_point

    point = {"queue": "inorder", "unroll": 2, "hit_latency": 4, "miss_latency": 30}
    result = run_point("experiment", "ooo-memory", {**point, "y_accesses": 2}, {})
    assert result["status"] == "ok", result["error"]
    assert result["metrics"]["ratio"] == 2.0  # in-order returns: U accesses of X per access of Y
    bad = run_point("experiment", "ooo-memory", {"colour": 1}, {})
    assert bad["status"] == "failed" and "colour" in bad["error"]
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nrun = "experiment"\nexperiment = "stoc"\n')
    with pytest.raises(
        SpecError, match="no per-point parameters.*sweepable experiments: ooo-memory"
    ):
        load_spec(spec)
