"""The command line at its edges: build caches keyed by everything that changes a design, outputs
that are special files (devices, FIFOs, links, sockets), a missing C++ compiler, a run too large
for the disk, Ctrl-C on a sweep, the defaults in ``--help``, the Pareto plot's untimed points, and
smaller cases (packaging, unused components, progress lines, ``make clean``)."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from gpurtl.sim.core import export, ports, registry
from gpurtl.sim.tools.cli import build_parser, main

from .test_cli_usage import one_line_error

ROOT = Path(__file__).resolve().parents[3]
GPURTL = str(Path(sys.executable).parent / "gpurtl")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# 1. two designs shared one cache entry ------------------------------------------------------------


@pytest.fixture
def fake_place_and_route(monkeypatch):
    """Yosys and nextpnr replaced by a report of fixed figures: the experiment's own code path
    (wrapper, export, synthesis folder) runs in a second, without a place and route."""
    from gpurtl.sim.tools import synth

    def fake(command, log, cwd, **kwargs):
        report = {"utilization": {"TRELLIS_FF": {"used": 99}}, "fmax": {"clk": {"achieved": 1.0}}}
        (Path(cwd) / "report.json").write_text(json.dumps(report))
        return 0.0

    monkeypatch.setattr(synth, "run_tool", fake)


def _plain_fp32_cmp():
    block = registry.get("fp32_cmp")
    return export.to_verilog(block, block.resolve(), cache=False)


def _synthesised_text(cache):
    (folder,) = (cache / "synth").glob("fp32_cmp-*")
    return (folder / "top.v").read_text()


@pytest.mark.parametrize("experiment_first", [True, False])
def test_1_fp32_synth_wrapper_and_plain_unit_have_their_own_cache_entries(
    tmp_path, monkeypatch, capsys, fake_place_and_route, experiment_first
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPURTL_CACHE", str(cache))
    plain = _plain_fp32_cmp()
    steps = [
        ("experiment", "fp32-synth", "--quick", "--out", tmp_path / "out"),
        ("export", "fp32_cmp", "-o", tmp_path / "plain.v"),
    ]
    for argv in steps if experiment_first else steps[::-1]:
        assert run(capsys, *argv)[0] == 0
    block = registry.get("fp32_cmp")
    # `gpurtl export` writes the exported text behind its `timescale line (gpurtl.sim.ports)
    written = ports.verilog_file(plain, block, block.resolve())
    assert (tmp_path / "plain.v").read_text() == written
    wrapped = _synthesised_text(cache)
    assert wrapped != plain and "unit" in wrapped  # the input register around the unit
    # both kept in the cache, each under its own key
    assert sorted(p.read_text() for p in (cache / "export").glob("fp32_cmp-*.v")) == sorted(
        [plain, wrapped]
    )
    # The same on a second export: each design reads its own entry.
    assert run(capsys, "export", "fp32_cmp", "-o", tmp_path / "again.v")[0] == 0
    assert (tmp_path / "again.v").read_text() == written


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_1_check_after_fp32_synth_simulates_the_plain_unit(
    tmp_path, monkeypatch, capsys, fake_place_and_route
):
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path / "cache"))
    assert run(capsys, "experiment", "fp32-synth", "--quick", "--out", tmp_path / "out")[0] == 0
    code, out, err = run(
        capsys, "check", "fp32_cmp", "--backend", "verilator", "--count", "100", "--seed", "3"
    )
    assert code == 0, out + err
    assert out.splitlines()[-1] == "100 passed, 0 failed"


def test_1_export_key_covers_the_tool_versions_and_options(tmp_path, monkeypatch):
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    block = registry.get("fp32_cmp")
    export.to_verilog(block, block.resolve())
    export.to_verilog(block, block.resolve())  # the same design and tools: the same entry
    monkeypatch.setattr(export, "tool_versions", lambda: {"amaranth": "0", "yosys": "other"})
    export.to_verilog(block, block.resolve())
    assert len(list((tmp_path / "export").glob("fp32_cmp-*.v"))) == 2


def test_1_sweep_point_key_covers_the_sources(monkeypatch):
    from gpurtl.sim import sweep

    before = sweep.point_key("synth", "fp32_cmp", {"stages": 1}, {"freq": 150})
    sweep.point_sources.cache_clear()
    monkeypatch.setattr(export, "_source_digest", "other RTL")
    try:
        after = sweep.point_key("synth", "fp32_cmp", {"stages": 1}, {"freq": 150})
    finally:
        sweep.point_sources.cache_clear()
    assert before != after  # `--resume` keeps no result of other sources


# 2. outputs replaced special files ----------------------------------------------------------------


@pytest.fixture
def never_replace_a_special_file(monkeypatch):
    """Fails the test (instead of doing it) when anything is renamed over a node that is not a
    regular file: as root, that would replace /dev/null or /dev/full for the whole machine."""
    real = os.replace

    def guarded(src, dst, **kwargs):
        if os.path.lexists(dst) and not stat.S_ISREG(os.lstat(dst).st_mode):
            raise AssertionError(f"{dst} would be replaced")
        return real(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", guarded)


def test_2_output_to_dev_null_writes_through(capsys, never_replace_a_special_file):
    code, _, err = run(capsys, "stimulus", "fp32_add", "--count", "3", "-o", "/dev/null")
    assert code == 0, err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_2_output_to_dev_full_is_one_line_error(capsys, never_replace_a_special_file):
    code, _, err = run(capsys, "stimulus", "fp32_add", "--count", "3", "-o", "/dev/full")
    one_line_error(code, err, "cannot write `/dev/full`: No space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_2_waveform_to_dev_full_is_an_error(capsys, never_replace_a_special_file):
    code, _, err = run(capsys, "check", "fp32_cmp", "--count", "5", "--vcd", "/dev/full")
    assert code == 2 and "Traceback" not in err, err
    assert (
        err.splitlines()[-1] == "gpurtl: error: cannot write `/dev/full`: No space left on device"
    )


def test_2_output_to_a_fifo_writes_through(tmp_path, capsys, never_replace_a_special_file):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    code, _, err = run(capsys, "stimulus", "fp32_add", "--count", "3", "-o", fifo)
    reader.join(timeout=30)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert len(received[0].splitlines()) == 3


def test_2_output_to_a_symlink_writes_its_target(tmp_path, capsys, never_replace_a_special_file):
    target, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    target.write_text("old\n")
    link.symlink_to(target.name)
    code, _, err = run(capsys, "export", "fp32_cmp", "-o", link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == target.name
    assert (
        target.read_text().startswith("/* Generated by") or "module fp32_cmp" in target.read_text()
    )


def test_2_a_socket_is_refused(tmp_path, capsys):
    import socket

    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        code, _, err = run(capsys, "stimulus", "fp32_add", "-o", path)
    finally:
        server.close()
    one_line_error(code, err, "must be a file, a character device or a FIFO")


# 3. a missing C++ compiler ------------------------------------------------------------------------


@pytest.fixture
def no_compiler(monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize(
    "argv, user",
    [
        (["check", "fp32_cmp", "--backend", "fast", "--count", "10"], "the fast backend"),
        (["check", "fp32_cmp", "--backend", "verilator", "--count", "10"], "verilator backend"),
        (["bench", "fp32_cmp", "--count", "10", "--slow-count", "10"], "`gpurtl bench`"),
    ],
)
def test_3_missing_compiler_is_one_line_naming_what_to_install(capsys, no_compiler, argv, user):
    code, _, err = run(capsys, *argv)
    one_line_error(code, err, f"{user}")
    assert "needs a C++ compiler (g++ or clang++" in err and "apt-get install g++ make" in err


def test_3_missing_compiler_refused_by_the_backends_themselves(no_compiler):
    from gpurtl.sim.backends import verilator
    from gpurtl.sim.backends.fast import build

    block = registry.get("fp32_cmp")
    for make in (lambda: verilator.build(block, block.resolve()), lambda: build.model(block, {})):
        with pytest.raises(export.ToolchainError, match="c\\+\\+, make"):
            make()


# 4. a huge --count on the fast backend ------------------------------------------------------------


@pytest.mark.verilator
def test_4_fast_run_prints_its_phases(capsys, monkeypatch):
    from gpurtl.sim.backends.fast import run as fast_run

    monkeypatch.setattr(fast_run, "PROGRESS_EVERY", 0.0)
    code, out, err = run(capsys, "check", "fp32_cmp", "--backend", "fast", "--count", "30000")
    assert code == 0, err
    assert "gpurtl: check: stimulus and golden outputs: 30000/30000 transactions" in err
    assert re.search(r"gpurtl: check: simulation: \d+/30000 transactions", err), err


def test_4_fast_run_too_large_for_the_disk_is_refused_before_any_work(capsys, monkeypatch):
    from gpurtl.sim.backends.fast import run as fast_run

    def refuse(*args, **kwargs):
        raise AssertionError("the model was built before the run's size was checked")

    monkeypatch.setattr(fast_run, "build_model", refuse)
    monkeypatch.setattr(
        fast_run.shutil, "disk_usage", lambda path: type("Usage", (), {"free": 10**9})()
    )
    code, _, err = run(capsys, "check", "fp32_cmp", "--backend", "fast", "--count", "100000000")
    assert code == 2 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(
        "gpurtl: error: 100000000 transactions need 3.2 GB of run files (32 bytes each)"
    ), err


# 5. Ctrl-C on a sweep -----------------------------------------------------------------------------


def test_5_ctrl_c_on_a_sweep_is_one_line(tmp_path):
    (tmp_path / "tiny.toml").write_text(
        '[sweep]\nrun = "check"\nblock = "fp32_cmp"\n'
        "[sweep.options]\ncount = 1000000\n[sweep.grid]\nstages = [1, 2]\n"
    )
    process = subprocess.Popen(
        [GPURTL, "sweep", "tiny.toml", "--workers", "1", "--out", "out"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = ""
    deadline = time.monotonic() + 120
    while "running" not in seen and time.monotonic() < deadline:
        seen += process.stderr.readline()
    assert "running" in seen, seen
    time.sleep(2)  # the worker is in the middle of its point
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the workers too
    err = seen + process.stderr.read()
    assert process.wait(timeout=60) == 130, err
    tail = err.split("running", 1)[1].splitlines()[1:]
    assert len(tail) == 1 and tail[0].startswith("gpurtl: interrupted; 0 finished points"), err
    assert "Traceback" not in err


# 6. --slow-count and the defaults in --help -------------------------------------------------------


@pytest.mark.parametrize("value", ["-5", "0"])
def test_6_slow_count_must_be_positive(capsys, value):
    code, _, err = run(capsys, "bench", "fp32_add", "--slow-count", value)
    one_line_error(code, err, f"--slow-count must be a positive integer, not {value}")


def _subparsers(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_6_every_default_is_shown_in_help():
    seen = 0
    for name, sub in _subparsers(build_parser()):
        text = " ".join(sub.format_help().split())
        for action in sub._actions:
            default = action.default
            if any(default is v for v in (None, False)) or default == "==SUPPRESS==":
                continue
            seen += 1
            assert f"(default: {default})" in text, (name, action.dest, text)
    assert seen >= 15
    bench = dict(_subparsers(build_parser()))["bench"].format_help()
    assert "(default: 2000 for blocks" in " ".join(bench.split())


def test_6_check_help_and_list_show_each_blocks_default_count(capsys):
    text = " ".join(dict(_subparsers(build_parser()))["check"].format_help().split())
    for block in registry.blocks():
        assert f"{block.name} {block.check_count}" in text
    code, out, _ = run(capsys, "list", "fp32_add", "--json")
    assert json.loads(out)[0]["check_count"] == registry.get("fp32_add").check_count
    code, out, _ = run(capsys, "list", "fp32_add")
    assert f"default --count: {registry.get('fp32_add').check_count}" in out


# 7. the smaller findings --------------------------------------------------------------------------


def test_7_every_package_folder_is_configured_so_setuptools_does_not_warn():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: ROOT / path for name, path in config["package-dir"].items()}
    for package in config["packages"]:
        top = next(n for n in folders if package == n or package.startswith(n + "."))
        folder = folders[top].joinpath(*package[len(top) :].split(".")[1:])
        for sub in folder.iterdir():
            if sub.is_dir() and sub.name != "__pycache__" and not sub.name.startswith("."):
                # setuptools warns about a folder Python could import but the list leaves out
                assert f"{package}.{sub.name}" in config["packages"], sub
    assert config["package-data"]["gpurtl.sim.sweep.specs"] == ["*.toml"]


def _unused_elaboratable_warnings(action):
    import gc

    from amaranth.hdl import UnusedElaboratable

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, UnusedElaboratable)]


def test_7_demo_and_bench_build_no_unused_components(tmp_path, monkeypatch):
    from gpurtl.sim.backends.fast import build

    # the demo's traversal experiment: tests/sim/experiments/traversal/test_traversal.py::test_quick_experiment
    block = registry.get("fp32_cmp")
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    # bench's fast-stalled row: the block exported once, its latency read without a second copy
    assert (
        _unused_elaboratable_warnings(
            lambda: build._design(block, {"stages": 1, "ftz": False}, "stalled")
        )
        == []
    )


def test_7_progress_lines_start_with_gpurtl(capsys, tmp_path, monkeypatch, fake_place_and_route):
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    code, _, err = run(capsys, "synth", "fp32_cmp")
    assert code == 0, err
    assert err and all(line.startswith("gpurtl: ") for line in err.splitlines()), err
    from gpurtl.sim.tools import cli

    for command in ("synth", "board"):  # what synth and board give the tools to report with
        cli._progress_lines(command)("yosys: started")
        assert capsys.readouterr().err == f"gpurtl: {command}: yosys: started\n"


def test_7_one_input_is_singular(tmp_path, capsys):
    code, _, err = run(capsys, "stimulus", "fp32_add", "--count", "1", "-o", tmp_path / "a.jsonl")
    assert code == 0 and "1 input of `fp32_add`" in err, err
    code, _, err = run(capsys, "run", "fp32_add", "-p", "stages=1", "--input", tmp_path / "a.jsonl")
    assert code == 0, err
    assert "run: 1 input through" in err and "1 transaction through" in err, err


def test_7_make_clean_removes_the_cache_only_inside_the_checkout(tmp_path):
    def dry_run(cache):
        env = dict(os.environ, GPURTL_CACHE=str(cache))
        result = subprocess.run(
            ["make", "-n", "clean"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        return result.stdout

    inside = ROOT / "build-cache-for-this-test"
    assert str(inside) in dry_run(inside)
    assert str(tmp_path) not in dry_run(tmp_path)  # a per-user or shared cache stays
    assert "gpurtl-out" in dry_run(tmp_path) and ".gpurtl-cache" not in dry_run(tmp_path)


def test_7_misspelt_sweep_parameter_is_found_when_the_spec_loads(tmp_path):
    from gpurtl.sim.sweep import SpecError, load_spec

    spec = tmp_path / "s.toml"
    spec.write_text(
        '[sweep]\nrun = "synth"\nblock = "fp32_add"\n\n[sweep.grid]\nstagess = [1, 2]\n'
    )
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    assert str(error.value) == (
        f"{spec}, line 6, `stagess`: `fp32_add` has no parameter `stagess`; known: stages, ftz"
    )


@pytest.mark.parametrize(
    "text, bits",
    [
        ('"Infinity"', 0x7F800000),
        ('"-Infinity"', 0xFF800000),
        ('"inf"', 0x7F800000),
        ('"NaN"', 0x7FC00000),
        ('"7f800000"', 0x7F800000),
    ],
)
def test_7_quoted_infinity_and_nan_are_accepted(tmp_path, text, bits):
    from gpurtl.sim.core.jsonio import read_jsonl

    from ..toy import IN

    source = tmp_path / "in.jsonl"
    source.write_text('{"a": 1, "b": 2, "f": %s}\n' % text)
    assert read_jsonl(source, IN)[0]["f"] == bits


def test_7_interrupted_experiment_leaves_no_out_folder(tmp_path, capsys, monkeypatch):
    from gpurtl.sim.experiments import obb

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(obb, "measure", interrupted)
    code, _, err = run(capsys, "experiment", "obb", "--out", tmp_path / "out" / "deeper")
    assert (
        code == 130
        and err
        == "gpurtl: experiment obb -> "
        + str(tmp_path / "out" / "deeper" / "obb")
        + "\ngpurtl: interrupted\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_7_list_shows_fp32_defaults_as_bit_patterns(capsys):
    code, out, _ = run(capsys, "list", "ray_accel")
    assert code == 0
    assert "ray.extent=0x7f800000" in out and "2139095040" not in out


# 8. the fp32-depth Pareto plot --------------------------------------------------------------------


def test_8_pareto_plot_leaves_out_points_whose_fmax_times_no_datapath(tmp_path, monkeypatch):
    import matplotlib.axes

    from gpurtl.sim.sweep import load_spec, write_report

    spec = load_spec(ROOT / "sim" / "sweep" / "specs" / "fp32_depth.toml")
    rows = [
        {
            "target": target,
            "params": {"stages": stages},
            "status": "ok",
            "metrics": {"latency": stages, "lut4": 900 + 10 * stages, "fmax_mhz": fmax},
            "seconds": 1,
        }
        for target in spec.targets
        for stages, fmax in ((1, 700.0), (2, 40.0), (4, 90.0), (10, 180.0))
    ]
    plotted = []
    real = matplotlib.axes.Axes.scatter

    def spy(self, x, y, *args, **kwargs):
        plotted.extend(y)
        return real(self, x, y, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", spy)
    paths = write_report(spec, rows, tmp_path)
    assert tmp_path / "pareto.png" in paths
    assert sorted(set(plotted)) == [40.0, 90.0, 180.0]
    report = (tmp_path / "report.md").read_text()
    assert "5 point(s) with a latency of 1 cycle are left out of the Pareto plot" in report
