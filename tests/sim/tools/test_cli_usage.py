"""The command line as a new user meets it: FP32 numbers and enumerations in inputs, output paths,
seeds and frequencies checked before any work, file modes, memory that stays flat for any
``--count``, Ctrl-C, what ``synth`` says it timed, ``list`` and ``--help``, the cache folder,
progress lines and the check's rate, ``demo --quick`` and Verilator waveforms."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpurtl.sim.backends import BACKENDS, pysim
from gpurtl.sim.core.progress import Progress
from gpurtl.sim.harness import golden_io, lockstep
from gpurtl.sim.harness.report import Report
from gpurtl.sim.tools.cli import main

from ..toy import toy_block

ROOT = Path(__file__).resolve().parents[3]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, message):
    assert code == 2, err
    assert message in err, err
    assert "Traceback" not in err and err.count("\n") == 1, err


# 2. FP32 numbers beyond binary32 ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1e39", "-1e39", str(2**128)])
def test_fp32_number_out_of_range_is_one_line(tmp_path, capsys, value):
    source = tmp_path / "in.jsonl"
    source.write_text('{"a": 1.0, "b": 2.0}\n{"a": %s, "b": 2.0}\n' % value)
    code, _, err = run(capsys, "run", "fp32_add", "-p", "stages=1", "--input", str(source))
    one_line_error(code, err, "in.jsonl:2: field `a` must be within the FP32 range")


def test_largest_float_and_infinity_are_accepted(tmp_path):
    from gpurtl.sim.core.jsonio import read_jsonl

    from ..toy import IN

    source = tmp_path / "in.jsonl"
    source.write_text('{"a": 1, "b": 2, "f": 3.4028235e38}\n{"a": 1, "b": 2, "f": Infinity}\n')
    assert [v["f"] for v in read_jsonl(source, IN)] == [0x7F7FFFFF, 0x7F800000]


# 3. output paths, checked before any simulation ---------------------------------------------------


@pytest.fixture
def no_simulation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a simulation started before the command line was checked")

    for backend in BACKENDS.values():
        monkeypatch.setattr(backend, "check", refuse)
        monkeypatch.setattr(backend, "run", refuse)


@pytest.mark.parametrize("option", ["--output", "-o", "--vcd"])
@pytest.mark.parametrize(
    "kind, message",
    [
        ("folder", "must be a file name, not a folder"),
        ("missing", "does not exist"),
        ("under_a_file", "is not a folder"),
        ("unwritable", "cannot write in folder"),
    ],
)
def test_bad_output_path_is_one_line_before_simulation(
    tmp_path, capsys, no_simulation, option, kind, message
):
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    (tmp_path / "file").write_text("")
    path = {
        "folder": tmp_path,
        "missing": tmp_path / "no" / "out.jsonl",
        "under_a_file": tmp_path / "file" / "out.jsonl",
        "unwritable": Path("/proc/gpurtl-out.jsonl"),
    }[kind]
    code, _, err = run(
        capsys, "run", "waitcnt", "-p", "waves=2", "--input", str(source), option, str(path)
    )
    one_line_error(code, err, message)


def test_check_vcd_and_demo_out_are_checked_too(tmp_path, capsys, no_simulation):
    code, _, err = run(capsys, "check", "waitcnt", "--vcd", str(tmp_path / "no" / "w.vcd"))
    one_line_error(code, err, "--vcd")
    (tmp_path / "file").write_text("")
    code, _, err = run(capsys, "demo", "--out", str(tmp_path / "file"))
    one_line_error(code, err, "must be a folder, not a file")
    code, _, err = run(capsys, "stimulus", "waitcnt", "-o", str(tmp_path))
    one_line_error(code, err, "not a folder")


# 4. --seed, --freq --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ("stimulus", "waitcnt", "--seed", "-1", "-o", "-"),
            "--seed must be a non-negative integer",
        ),
        (("check", "waitcnt", "--seed", "-1"), "--seed must be a non-negative integer, not -1"),
        (("synth", "fp32_cmp", "--freq", "0"), "--freq must be a positive number, not 0"),
        (("synth", "fp32_cmp", "--freq", "-5"), "--freq must be a positive number, not -5"),
        (("synth", "fp32_cmp", "--freq", "nan"), "--freq must be a positive number"),
        (("check", "waitcnt", "--count", "0"), "--count must be a positive integer, not 0"),
    ],
)
def test_bad_numbers_are_refused(capsys, no_simulation, argv, message):
    code, _, err = run(capsys, *argv)
    one_line_error(code, err, message)


def test_synthesize_refuses_a_bad_frequency():
    from gpurtl.sim.core import registry
    from gpurtl.sim.tools.synth import synthesize

    block = registry.get("fp32_cmp")
    with pytest.raises(ValueError, match="`freq` must be a positive number of MHz, not 0"):
        synthesize(block, block.resolve(), freq=0)


# 5. file modes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_respect_the_umask(tmp_path, capsys, umask, mode):
    target = tmp_path / "in.jsonl"
    old = os.umask(umask)
    try:
        code, _, err = run(capsys, "stimulus", "waitcnt", "-o", str(target))
    finally:
        os.umask(old)
    assert code == 0, err
    assert target.stat().st_mode & 0o777 == mode


# 6. memory stays flat for any --count -------------------------------------------------------------


def test_check_streams_stimulus_and_golden_outputs(monkeypatch):
    """A large count runs in chunks: the stimulus is never asked for more than one chunk, and the
    inputs generated but not yet compared never exceed a chunk plus the pipeline's contents."""
    monkeypatch.setattr(golden_io, "CHUNK", 64)
    block = toy_block()
    state = {"generated": 0, "compared": 0, "largest_request": 0, "most_pending": 0}

    def stimulus(rng, count, stages):
        state["largest_request"] = max(state["largest_request"], count)
        state["most_pending"] = max(state["most_pending"], state["generated"] - state["compared"])
        state["generated"] += count
        return block.stimulus(rng, count, stages)

    def golden(stages):
        def model(tx):
            return {"s": tx["a"] + tx["b"], "f": tx["f"]}

        return model

    counting = block.__class__(
        **{**block.__dict__, "stimulus": stimulus, "golden": golden, "check_count": 10}
    )
    compare = pysim.compare_events

    def counting_compare(*args, **kwargs):
        report, on_output = compare(*args, **kwargs)

        def on_counted(event):
            state["compared"] += 1
            on_output(event)

        return report, on_counted

    monkeypatch.setattr(pysim, "compare_events", counting_compare)
    report = BACKENDS["pysim"].check(counting, counting.resolve(), count=2000, seed=3)
    assert (report.passed, report.failed) == (2000, 0)
    assert state["generated"] == 2000 and state["largest_request"] == 64
    assert state["most_pending"] <= 64 + 8


def test_stimulus_is_written_in_chunks(capsys, monkeypatch):
    from gpurtl.sim.core import registry

    monkeypatch.setattr(golden_io, "CHUNK", 16)
    block = registry.get("waitcnt")
    requests = []

    def stimulus(rng, count, **params):
        requests.append(count)
        return block.stimulus(rng, count, **params)

    monkeypatch.setattr(
        registry,
        "get",
        lambda name: block.__class__(**{**block.__dict__, "stimulus": stimulus, "check_count": 20}),
    )
    code, out, _ = run(capsys, "stimulus", "waitcnt", "--count", "60", "-o", "-")
    assert code == 0 and len(out.splitlines()) == 60
    assert requests == [20, 16, 16, 8]  # the first chunk is at least the block's check_count


def test_default_check_is_one_stimulus_call(monkeypatch):
    """The FP32 units' default run keeps its whole special-value cross product."""
    from gpurtl.sim.core import registry

    block = registry.get("fp32_add")
    assert block.check_count > golden_io.CHUNK
    params = block.resolve()
    inputs, _ = golden_io.random_stream(block, params, block.check_count, seed=0)
    expected = block.stimulus(
        __import__("numpy").random.default_rng(0), block.check_count, **params
    )
    from gpurtl.sim.core import layouts

    in_layout, _ = block.layouts(**params)
    assert list(inputs) == [layouts.pack(in_layout, value) for value in expected]


@pytest.mark.slow
def test_peak_memory_does_not_grow_with_count():
    """Peak RSS of a subprocess: 20x the transactions, about the same memory."""
    script = (
        "import resource, sys\n"
        "from gpurtl.sim.backends import BACKENDS\n"
        "sys.path.insert(0, %r)\n"
        "from tests.sim.toy import toy_block\n"
        "block = toy_block()\n"
        "BACKENDS['pysim'].check(block, block.resolve(), count=int(sys.argv[1]))\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    ) % str(ROOT)
    peaks = [
        int(
            subprocess.run(
                [sys.executable, "-c", script, str(n)], check=True, capture_output=True, text=True
            ).stdout
        )
        for n in (5000, 100_000)
    ]
    assert peaks[1] < peaks[0] * 1.25, peaks


# 7. Ctrl-C ----------------------------------------------------------------------------------------


def _interrupt(argv, cwd, wait_for, after=1.0):
    """Start ``gpurtl argv``, wait for ``wait_for`` (text on stderr, or a function that returns
    true when it is time), send SIGINT twice."""
    # A shell starts background jobs with SIGINT ignored; the child gets the default back.
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "gpurtl"), *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = ""
    deadline = time.monotonic() + 120
    if callable(wait_for):
        while not wait_for() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert wait_for()
    else:
        while wait_for not in seen and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            seen += line
        assert wait_for in seen, seen
    time.sleep(after)
    process.send_signal(signal.SIGINT)
    time.sleep(0.2)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # an impatient user presses it again
    out, err = process.communicate(timeout=60)
    return process.returncode, seen + err


def test_ctrl_c_is_one_line_exit_130(tmp_path):
    code, err = _interrupt(["check", "fp32_add", "--count", "1000000"], tmp_path, "check fp32_add")
    assert code == 130, err
    tail = err.split("check fp32_add", 1)[1].splitlines()[1:]
    assert tail == ["gpurtl: interrupted"], err
    assert "Traceback" not in err and "UnusedElaboratable" not in err


def test_ctrl_c_in_an_experiment_leaves_no_files(tmp_path):
    # Interrupted while it runs (after its first progress line), not after it has finished.
    code, err = _interrupt(
        ["experiment", "obb", "--quick", "--out", "out"], tmp_path, "obb: 1/9", after=0.5
    )
    assert code == 130, err
    assert "Traceback" not in err and "UnusedElaboratable" not in err
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")] in ([], ["out"])


# 8. synth says what its Fmax times ----------------------------------------------------------------


@pytest.mark.full
def test_synth_output_says_what_was_timed(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    code, out, _ = run(capsys, "synth", "fp32_cmp", "-p", "stages=1")
    assert code == 0
    assert re.search(r"Fmax [\d.]+ MHz", out)
    assert "Fmax timed: register-to-register paths inside the block only" in out
    assert "fp32-synth" in out


# 9. enumerations by name --------------------------------------------------------------------------


def test_enumerations_print_as_names_and_read_both_ways(tmp_path, capsys):
    code, out, _ = run(capsys, "stimulus", "waitcnt", "-p", "waves=2", "--count", "20", "-o", "-")
    assert code == 0
    classes = {json.loads(line)["issue"]["cls"] for line in out.splitlines()}
    from gpurtl.facts.waitcnt import InstClass

    assert classes <= {member.name for member in InstClass} and classes
    source = tmp_path / "in.jsonl"
    source.write_text(
        out
        + json.dumps({"issue": {"valid": 1, "wave": 0, "cls": InstClass.VMEM_LOAD.value}})
        + "\n"
    )
    code, _, err = run(capsys, "run", "waitcnt", "-p", "waves=2", "--input", str(source))
    assert code == 0 and "21 passed, 0 failed" in err


# 10. discoverability ------------------------------------------------------------------------------


def test_list_one_block_at_given_parameters(capsys):
    code, out, _ = run(capsys, "list", "fp32_add", "-p", "stages=3")
    assert code == 0
    assert out.startswith("fp32_add  (pipeline, latency 3)")
    assert "stages = 3  (default stages=9 (1..10))" in out
    assert "may be left out: sub=0" in out
    code, out, _ = run(capsys, "list", "ray_accel", "-p", "triangles=0")
    assert "..." not in out and "status:u2" in out  # the full layout, not cut at 160 chars


def test_list_json_has_ranges_structures_and_optional_fields(capsys):
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0
    entries = {entry["name"]: entry for entry in json.loads(out)}
    waitcnt = entries["waitcnt"]
    waves = next(p for p in waitcnt["params"] if p["name"] == "waves")
    assert waves["range"] == [1, 64] and waves["default"] == 16
    cls = waitcnt["in"]["issue"]["cls"]
    assert cls["enum"] == "InstClass" and "VMEM_LOAD" in cls["members"]
    assert entries["fp32_add"]["in"]["a"] == "f32"
    assert entries["fp32_add"]["optional_inputs"] == ["sub"]
    assert entries["fp32_add"]["latency"] == 9 and waitcnt["latency"] is None
    assert entries["ray_accel"]["out"]["dw"] == {"array": "u32", "length": 10}


def test_version_defaults_in_help_and_run_o(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert re.match(r"gpurtl \d+\.\d+", capsys.readouterr().out)
    for command in ("check", "synth", "stimulus", "experiment", "demo", "run"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert "(default:" in help_text, command
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n{}\n")
    code, _, err = run(
        capsys, "run", "waitcnt", "--input", str(source), "-o", str(tmp_path / "out.jsonl")
    )
    assert code == 0 and len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


# 11. the Verilator cache --------------------------------------------------------------------------


def test_cache_folder_is_per_user_unless_gpurtl_cache(monkeypatch, tmp_path):
    from platformdirs import user_cache_dir

    from gpurtl.sim.core.export import cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPURTL_CACHE", raising=False)
    assert cache_dir() == Path(user_cache_dir("gpurtl")).resolve()
    assert not (tmp_path / ".gpurtl-cache").exists()
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


# 12. progress lines, cycles/s without the build ---------------------------------------------------


def test_progress_lines_when_not_a_terminal(capsys):
    progress = Progress("sweep", interval=3600)
    for done in range(5):
        progress(done, 4, f"step {done}")
    err = capsys.readouterr().err.splitlines()
    assert err == ["gpurtl: sweep: 0/4 step 0", "gpurtl: sweep: 4/4 step 4"]


def test_check_rate_leaves_out_the_build(capsys, monkeypatch):
    def slow_build_check(block, params, **kwargs):
        time.sleep(0.5)
        report = Report()
        report.passed, report.cycles, report.build_s = 10, 10_000, 0.45
        return report

    monkeypatch.setattr(BACKENDS["pysim"], "check", slow_build_check)
    code, out, _ = run(capsys, "check", "waitcnt")
    rate = int(re.search(r"\((\d+) cycles/s\)", out).group(1))
    assert rate > 50_000, out  # 10000 cycles in ~0.05 s of simulation, not 0.5 s


# 13. demo --quick ---------------------------------------------------------------------------------


def test_quick_demo_records_short_waveforms(tmp_path, capsys, monkeypatch):
    from gpurtl.sim import experiments
    from gpurtl.sim.tools import demo

    monkeypatch.setattr(experiments, "experiments", lambda: {})
    counts = []

    def fake_check(block, params, *, count, seed, vcd):
        counts.append(count)
        Path(vcd).write_text("$enddefinitions $end\n")
        report = Report()
        report.passed = count
        return report

    monkeypatch.setattr(BACKENDS["pysim"], "check", fake_check)
    code, _, err = run(capsys, "demo", "--quick", "--out", str(tmp_path / "demo"))
    assert code == 0, err
    assert set(counts) == {demo.DEMO_VCD_COUNT[True]} and demo.DEMO_VCD_COUNT[True] <= 10
    assert len(counts) == len(demo.QUICK_VCD_BLOCKS)  # the slow ray-accelerator blocks are left out
    assert "writing waveforms" in err
    assert (tmp_path / "demo" / "vcd" / "waitcnt.vcd").exists()
    assert not (tmp_path / "demo" / "vcd" / "ray_accel.vcd").exists()
    summary = (tmp_path / "demo" / "summary.md").read_text()
    assert "gpurtl check ray_accel --count 8 --vcd" in summary
    assert not [p for p in (tmp_path / "demo").iterdir() if p.name.startswith(".")]


# 1. waveforms from Verilator ----------------------------------------------------------------------


@pytest.mark.verilator
@pytest.mark.slow  # a trace-enabled Verilator build: about two minutes on a loaded machine
def test_verilator_vcd_for_check_and_run(tmp_path, capsys):
    wave = tmp_path / "check.vcd"
    code, out, err = run(
        capsys,
        "check",
        "fp32_cmp",
        "-p",
        "stages=1",
        "--backend",
        "verilator",
        "--count",
        "20",
        "--vcd",
        str(wave),
    )
    assert code == 0, err
    assert "$enddefinitions" in wave.read_text()
    source = tmp_path / "in.jsonl"
    source.write_text('{"a": 1.0, "b": 2.0}\n')
    wave = tmp_path / "run.vcd"
    code, out, err = run(
        capsys,
        "run",
        "fp32_cmp",
        "-p",
        "stages=1",
        "--backend",
        "verilator",
        "--input",
        str(source),
        "--vcd",
        str(wave),
    )
    assert code == 0, err
    assert "$enddefinitions" in wave.read_text()


def test_long_check_prints_progress_lines(capsys, monkeypatch):
    monkeypatch.setattr(lockstep, "PROGRESS_INTERVAL", 1e-9)
    code, out, err = run(capsys, "check", "waitcnt", "-p", "waves=2", "--count", "30")
    assert code == 0
    lines = [line for line in err.splitlines() if line.startswith("gpurtl: check: cycle ")]
    assert len(lines) >= 25 and lines[-1].endswith("of 30 compared")
