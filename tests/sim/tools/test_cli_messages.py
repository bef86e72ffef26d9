"""What the command line and the reports say: help texts, count lines, parameter rules, sweep
reports and resumed sweeps, change figures and the matrix report without synthesis figures."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpurtl.sim.experiments import obb
from gpurtl.sim.sweep import load_spec, pending, run_point, run_sweep, write_report
from gpurtl.sim.tools import cli
from gpurtl.sim.tools.cli import main

ROOT = Path(__file__).resolve().parents[3]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", [c.name for c in cli.COMMANDS])
def test_help_shows_each_default_once(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: " in text or command in ("list", "report", "encode")
    assert not re.search(r"\(default: ([^)]*)\) \(default: \1\)", text)


def test_check_of_a_cycle_block_counts_its_cycles_once(capsys):
    code, out, _ = run(capsys, "check", "waitcnt", "-p", "waves=2", "--count", "40")
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("40 clock cycles, "), first
    assert "40 cycles, 40 clock cycles" not in out


def test_check_of_a_pipeline_counts_transactions_and_cycles(capsys):
    code, out, _ = run(capsys, "check", "fp32_cmp", "--count", "20")
    assert code == 0
    assert re.match(r"20 transactions, \d+ clock cycles, ", out.splitlines()[0])


def test_a_parameter_out_of_range_is_told_its_rule(capsys):
    code, _, err = run(capsys, "list", "l0_cache", "-p", "size=3")
    assert code == 2
    assert "from 128 to 65536" in err and "128 x ways x a power of two" in err
    # a value inside the range that breaks the rule gets the block's own check
    code, _, err = run(capsys, "list", "l0_cache", "-p", "size=1000")
    assert code == 2 and "multiple of 128 x ways" in err


@pytest.mark.parametrize(
    "before, after, text",
    [
        (10.0, 8.0, "20.0% fewer"),
        (2.0, 2.01, "0.5% more"),
        (3.0, 3.0, "the same"),
        (0.0, 1.0, "none before"),
    ],
)
def test_obb_change_is_written_as_fewer_or_more(before, after, text):
    assert obb.change_text(before, after) == text
    assert "-" not in obb.change_text(before, after)


CHECK_SPEC = """\
[sweep]
name = "cmp-check"
run = "check"
block = "fp32_cmp"

[sweep.options]
count = 4

[sweep.fixed]
ftz = false

[sweep.grid]
stages = [1, 2]
"""


def _points_on_disk(spec, out):
    """Every point of ``spec`` run here, in this process, and written as the sweep writes it."""
    from gpurtl.sim.sweep import point_key

    (out / "points").mkdir(parents=True)
    for target, params in spec.tasks():
        key = point_key(spec.run, target, params, spec.options)
        result = run_point(spec.run, target, params, spec.options) | {"key": key}
        (out / "points" / f"{key}.json").write_text(json.dumps(result))


def test_resume_with_nothing_left_starts_no_cluster(tmp_path, monkeypatch, capsys):
    (tmp_path / "spec.toml").write_text(CHECK_SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    out = tmp_path / "out"
    _points_on_disk(spec, out)
    assert pending(spec, out) == []

    import dask.distributed

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started with nothing to run")

    monkeypatch.setattr(dask.distributed, "LocalCluster", no_cluster)
    monkeypatch.setattr(dask.distributed, "Client", no_cluster)
    counts = run_sweep(spec, out, resume=True, progress=False)
    assert counts == {"done": 0, "failed": 0, "skipped": 2, "lost": 0, "total": 2}
    assert (out / "report.md").exists()
    code, _, err = run(capsys, "sweep", str(tmp_path / "spec.toml"), "--out", str(out), "--resume")
    assert code == 0
    assert "nothing to run" in err and "Dask cluster" not in err


def test_pending_counts_a_failed_or_damaged_point_as_missing(tmp_path):
    (tmp_path / "spec.toml").write_text(CHECK_SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    out = tmp_path / "out"
    _points_on_disk(spec, out)
    first, second = sorted((out / "points").glob("*.json"))
    first.write_text("{not json")
    second.write_text(json.dumps(json.loads(second.read_text()) | {"status": "failed"}))
    assert len(pending(spec, out)) == 2


def test_sweep_report_labels_a_measured_column_named_like_a_parameter(tmp_path):
    (tmp_path / "spec.toml").write_text(CHECK_SPEC)
    spec = load_spec(tmp_path / "spec.toml")
    rows = [
        {
            "target": "fp32_cmp",
            "status": "ok",
            "params": {"ftz": False, "stages": stages},
            # a metric named like a parameter: what was measured, not what was asked for
            "metrics": {"stages": stages + 10, "passed": 4},
            "seconds": 1.0,
        }
        for stages in (1, 2)
    ]
    write_report(spec, rows, tmp_path)
    text = (tmp_path / "report.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| target"))
    assert "| stages (measured) |" in header and "| passed |" in header
    assert "every point: ftz=False" in text
    body = [line for line in text.splitlines() if line.startswith("| fp32_cmp")]
    assert [line.split(" | ")[1] for line in body] == ["stages=1", "stages=2"]


def test_matrix_report_without_synthesis_figures_says_why(tmp_path):
    from gpurtl.sim.experiments import matrix

    data = matrix.measure(quick=True)
    data["synth"] = [
        {"family": f, "preset": p, "lut4": None, "ff": None, "dsp": None, "cached": False}
        for f, p in matrix.SYNTH_BUILDS
    ]
    matrix.report(data, tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    section = summary.split("## One dot-product unit")[1].split("##")[0]
    assert "No synthesis figures" in section and "|" not in section
    assert not (tmp_path / "matrix_synth.png").exists()
    assert not (tmp_path / "matrix_synth.csv").exists()
    # one unit with figures: a table of that one, the others named as missing
    data["synth"][0] |= {"lut4": 1234, "ff": 567, "dsp": 8, "cached": True}
    matrix.report(data, tmp_path)
    section = (tmp_path / "summary.md").read_text().split("## One dot-product unit")[1]
    section = section.split("##")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "1234" in line]
    assert len(rows) == 1 and "Not in the build cache" in section
    assert (tmp_path / "matrix_synth.png").exists()


def test_makefile_install_filter_silences_the_editable_warning():
    makefile = (ROOT / "Makefile").read_text()
    value = re.search(r'QUIET_EDITABLE := PYTHONWARNINGS="([^"]+)"', makefile)[1]
    installs = [line for line in makefile.splitlines() if "pip install" in line and " -e " in line]
    assert installs and all("$(QUIET_EDITABLE)" in line for line in installs)
    # the text setuptools' editable_wheel warns with, and another warning that must still show
    script = (
        "import warnings\n"
        "warnings.warn('Editable installation.\\n!!\\n  Please be careful', UserWarning)\n"
        "warnings.warn('another warning', UserWarning)\n"
    )
    env = dict(os.environ, PYTHONWARNINGS=value)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert "Editable installation" not in done.stderr and "another warning" in done.stderr
