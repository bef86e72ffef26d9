"""``gpurtl sweep``: specs, per-point results on a real Dask ``LocalCluster`` (2 workers on
loopback), a killed worker, an interrupted sweep and ``--resume``."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from gpurtl.sim.sweep import (
    SpecError,
    collect,
    load_spec,
    pareto_front,
    point_key,
    run_point,
    run_sweep,
)
from gpurtl.sim.tools import cli

CHECK_SPEC = """\
[sweep]
name = "add-check"
run = "check"
block = "fp32_add"

[sweep.options]
count = 12

[sweep.grid]
stages = [1, 2, 3]
ftz = [false, true]
"""


def _spec(tmp_path, text, name="spec.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_grid_expands_to_points(tmp_path):
    spec = load_spec(_spec(tmp_path, CHECK_SPEC))
    assert spec.run == "check" and spec.targets == ("fp32_add",)
    assert len(spec.tasks()) == 6
    assert {(p["stages"], p["ftz"]) for p in spec.points} == {
        (s, f) for s in (1, 2, 3) for f in (False, True)
    }
    assert spec.options == {"count": 12, "seed": 0, "backend": "pysim"}


def test_point_key_is_stable_and_distinguishes_points():
    a = point_key("check", "fp32_cmp", {"stages": 1}, {"count": 5})
    assert a == point_key("check", "fp32_cmp", {"stages": 1}, {"count": 5})
    assert a != point_key("check", "fp32_cmp", {"stages": 2}, {"count": 5})
    assert a != point_key("check", "fp32_cmp", {"stages": 1}, {"count": 6})
    assert a != point_key("synth", "fp32_cmp", {"stages": 1}, {"count": 5})


@pytest.mark.parametrize(
    "text, line, key",
    [
        ('[sweep]\nname = "x"\nrun = "synthesize"\nblock = "fp32_cmp"\n', 3, "run"),
        ('[sweep]\nrun = "synth"\nblock = "no_such_block"\n', 3, "block"),
        ('[sweep]\nrun = "synth"\nblock = "fp32_cmp"\ncolour = 3\n', 4, "colour"),
        (
            '[sweep]\nrun = "synth"\nblock = "fp32_cmp"\n[sweep.options]\n\nfreq = "fast"\n',
            6,
            "freq",
        ),
        ('[sweep]\nrun = "check"\nblock = "fp32_cmp"\n[sweep.grid]\nstages = 3\n', 5, "stages"),
    ],
)
def test_malformed_spec_names_file_line_and_key(tmp_path, text, line, key):
    path = _spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert str(path) in message and f"line {line}" in message and f"`{key}`" in message


def test_toml_syntax_error_names_the_line(tmp_path):
    path = _spec(tmp_path, '[sweep]\nrun = "check"\nblock = fp32_cmp\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value)


def test_cli_malformed_spec_is_one_line_exit_2(tmp_path, capsys):
    path = _spec(
        tmp_path, '[sweep]\nrun = "check"\nblock = "fp32_cmp"\n[sweep.options]\ncount = -4\n'
    )
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 5" in err[0] and "`count`" in err[0]
    assert not (tmp_path / "out").exists()


def test_bad_parameter_is_a_failed_point_not_a_crash():
    result = run_point(
        "check", "fp32_cmp", {"stages": 999}, {"count": 4, "seed": 0, "backend": "pysim"}
    )
    assert result["status"] == "failed"
    assert "stages" in result["error"]
    good = run_point(
        "check", "fp32_cmp", {"stages": 1}, {"count": 4, "seed": 0, "backend": "pysim"}
    )
    assert good["status"] == "ok" and good["metrics"]["passed"] == 4
    assert good["metrics"]["failed"] == 0 and good["metrics"]["latency"] == 1


def test_pareto_front():
    points = [(100, 50.0), (200, 80.0), (150, 40.0), (300, 80.0), (120, 60.0)]
    assert pareto_front(points) == [0, 4, 1]


def test_sweep_end_to_end_on_a_local_cluster(tmp_path):
    text = CHECK_SPEC.replace("stages = [1, 2, 3]", "stages = [1, 2, 999]")
    spec = load_spec(_spec(tmp_path, text))
    out = tmp_path / "out"
    counts = run_sweep(spec, out, workers=2, progress=False)
    assert counts == {"done": 4, "failed": 2, "skipped": 0, "lost": 0, "total": 6}
    rows = collect(out / "points", spec)
    assert len(rows) == 6
    assert {r["params"]["stages"] for r in rows if r["status"] == "failed"} == {999}
    assert all(r["metrics"]["failed"] == 0 for r in rows if r["status"] == "ok")
    # the points ran in the cluster's worker processes, not in this one
    assert all(r["worker_pid"] != os.getpid() for r in rows)
    table = (out / "results.csv").read_text().splitlines()
    assert len(table) == 7 and "param.stages" in table[0]
    report = (out / "report.md").read_text()
    assert "add-check" in report and "failed" in report
    heat_maps = list(out.glob("heatmap_*.png"))
    assert heat_maps, "a two-parameter grid gets a heat map"


@pytest.mark.full
def test_interrupted_sweep_resumes_only_missing_points(tmp_path):
    spec = load_spec(_spec(tmp_path, CHECK_SPEC))
    out = tmp_path / "out"
    seen = []

    def interrupt_after_two(result):
        seen.append(result["key"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, workers=2, progress=False, on_point=interrupt_after_two)
    on_disk = {p.stem for p in (out / "points").glob("*.json")}
    assert set(seen) <= on_disk and len(on_disk) >= 2
    assert (out / "results.csv").exists(), "the table is written for the finished points"
    ran = []
    counts = run_sweep(
        spec, out, workers=2, resume=True, progress=False, on_point=lambda r: ran.append(r["key"])
    )
    assert counts["skipped"] == len(on_disk)
    assert set(ran).isdisjoint(on_disk)
    assert len(ran) == 6 - len(on_disk)
    assert len(collect(out / "points", spec)) == 6


@pytest.mark.full
def test_killed_worker_loses_no_finished_point(tmp_path):
    spec = load_spec(_spec(tmp_path, CHECK_SPEC.replace("count = 12", "count = 60")))
    out = tmp_path / "out"
    finished, killed = [], []

    def kill_a_worker(result):
        finished.append(result["key"])
        if not killed and result.get("worker_pid"):
            os.kill(result["worker_pid"], signal.SIGKILL)  # the nanny starts a new worker
            killed.append(result["worker_pid"])

    counts = run_sweep(spec, out, workers=2, progress=False, on_point=kill_a_worker)
    assert killed
    assert counts["done"] + counts["lost"] == 6 and counts["failed"] == 0
    for key in finished:
        assert json.loads((out / "points" / f"{key}.json").read_text())["key"] == key
    rows = collect(out / "points", spec)
    assert len(rows) == 6
    assert all(r["status"] in ("ok", "lost") for r in rows)


@pytest.mark.parametrize("name", ["fp32-depth", "ray-accel-builds", "ooo-memory-latency"])
def test_shipped_example_specs_parse(name):
    from pathlib import Path

    import gpurtl.sim

    path = Path(gpurtl.sim.__file__).parent / "sweep" / "specs" / f"{name.replace('-', '_')}.toml"
    spec = load_spec(path)
    assert spec.name == name and spec.tasks()


@pytest.mark.full
def test_cli_sweep_runs_and_prints_counts(tmp_path):
    path = _spec(
        tmp_path,
        CHECK_SPEC.replace("ftz = [false, true]", "ftz = [false]").replace(
            "stages = [1, 2, 3]", "stages = [1, 2]"
        ),
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpurtl.sim.tools.cli",
            "sweep",
            str(path),
            "--out",
            str(out),
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 done, 0 failed" in proc.stdout
    assert "sweep add-check: 2/2 done" in proc.stderr  # progress lines without a terminal
    assert len(list((out / "points").glob("*.json"))) == 2
