"""What the command line guards against: Ctrl-C while gpurtl is still importing, an output file
that is the input file, a check's rate that would include the Verilator build or round to
``0 cycles/s``, an experiment option that the summary names but the parser refuses, and an X or
Z from a four-state simulator (one line naming signal, cycle and block, no traceback)."""

import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.fast.run import FastReport
from gpurtl.sim.harness.engine import UndefinedValue
from gpurtl.sim.harness.report import cycles_per_second
from gpurtl.sim.tools import cli

ROOT = Path(__file__).resolve().parents[3]


def run(capsys, *argv):
    code = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_ctrl_c_while_the_console_script_imports_is_one_line():
    """The console script as pyproject.toml declares it, interrupted right after Python started
    it: the import of the command line (Amaranth, numpy, the registry) is still running."""
    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["gpurtl"]
    module, function = script.split(":")
    # Python's own SIGINT handler, as a shell starts it (a test runner's worker may ignore SIGINT,
    # which a child inherits)
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "print('started', flush=True); "
        f"from {module} import {function}; sys.exit({function}(['list']))"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout.readline() == "started\n"
    time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)
    assert "Traceback" not in err, err
    assert err == "gpurtl: interrupted\n" and child.returncode == 130, (child.returncode, err)


def test_the_console_script_module_imports_nothing_heavy():
    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["gpurtl"]
    module = script.split(":")[0]
    code = (
        f"import sys, {module}; print(sorted(m for m in ('amaranth', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["run", "encode"])
def test_an_output_that_is_the_input_is_refused(tmp_path, capsys, command):
    source = tmp_path / "good.jsonl"
    text = '{"a": 1.0, "b": 2.0}\n'
    source.write_text(text)
    (tmp_path / "link.jsonl").symlink_to(source)
    block = ["fp32_add"] if command == "run" else []
    for output in (source, tmp_path / "link.jsonl"):
        code, out, err = run(capsys, command, *block, "--input", source, "-o", output)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"--output `{output}` is the --input file" in err
        assert source.read_text() == text


def _fast_check(cycles, sim_seconds, build_seconds):
    def check(block, params, **kwargs):
        time.sleep(0.2)
        report = FastReport()
        report.passed, report.cycles = 10, cycles
        report.build_seconds, report.sim_seconds = build_seconds, sim_seconds
        return report

    return check


def test_fast_check_rate_is_the_simulation_phase(capsys, monkeypatch):
    """A 100 s build (reported, not slept) and 0.5 s of simulation: the rate is 2000 cycles/s."""
    monkeypatch.setattr(BACKENDS["fast"], "check", _fast_check(1000, 0.5, 100.0))
    monkeypatch.setattr(cli, "_backend_tools", lambda args: None)
    code, out, err = run(capsys, "check", "fp32_add", "--backend", "fast", "--count", "10")
    assert code == 0, err
    assert "(2000 cycles/s)" in out, out


def test_a_slow_rate_is_never_printed_as_zero(capsys, monkeypatch):
    monkeypatch.setattr(BACKENDS["fast"], "check", _fast_check(3, 10.0, 0.0))
    monkeypatch.setattr(cli, "_backend_tools", lambda args: None)
    code, out, err = run(capsys, "check", "fp32_mul", "--backend", "fast", "--count", "10")
    assert code == 0, err
    assert "(0.3 cycles/s)" in out and "(0 cycles/s)" not in out, out
    assert cycles_per_second(0, 1.0) == "0 cycles/s" and cycles_per_second(5, 0) == "not timed"
    assert cycles_per_second(123_456, 1.0) == "123456 cycles/s"


def test_the_matrix_full_run_is_a_gpurtl_experiment_option(monkeypatch, tmp_path, capsys):
    from gpurtl.sim.experiments import matrix

    named = matrix._COMMANDS["full"].strip("`").split()
    assert named == ["gpurtl", "experiment", "matrix", "--full"]
    seen = {}

    def measure(quick=False, progress=None, full=False):
        seen.update(quick=quick, full=full)
        raise KeyboardInterrupt  # stop before measuring: only the options are checked here

    monkeypatch.setattr(matrix, "measure", measure)
    code, _, err = run(capsys, *named[1:], "--out", tmp_path)
    assert code == 130 and "unrecognized arguments" not in err, err
    assert seen == {"quick": False, "full": True}


def test_an_undefined_output_is_one_line_naming_signal_cycle_and_block(capsys, monkeypatch):
    def check(block, params, **kwargs):
        raise UndefinedValue("o__valid", 1, [0], "x", block=block.name, backend="icarus")

    monkeypatch.setattr(BACKENDS["pysim"], "check", check)
    code, out, err = run(capsys, "check", "ds_bvh_stack", "--count", "5")
    assert code == 1 and "Traceback" not in err + out, err
    assert err.splitlines()[1:] == [
        "gpurtl: error: `ds_bvh_stack` on icarus: output `o__valid` is X in cycle 1 after reset"
    ]


def test_undefined_payload_bits_name_their_field():
    from gpurtl.sim.backends.verilator import ICARUS, undefined
    from gpurtl.sim.core import layouts, registry

    block = registry.get("fp32_add")
    params = block.resolve()
    _, out_layout = block.layouts(**params)
    leaf = layouts.leaves(out_layout)[-1]
    width = leaf.offset + leaf.width
    value = "".join("z" if width - 1 - i == leaf.offset else "0" for i in range(width))
    data = {"signal": "o__payload", "cycle": 4, "bits": [leaf.offset], "value": value}
    error = undefined(data, "fp32_add", params, ICARUS)
    assert str(error) == (
        f"`fp32_add` on icarus: output `o__payload` has Z in bit {leaf.offset} "
        f"(field `{leaf.path}`) in cycle 4 after reset"
    )


def test_cocotb_port_reads_raise_undefined_value_with_the_cycle():
    from cocotb.types import LogicArray

    from gpurtl.sim.backends.cocotb_io import CocotbIO

    class Handle:
        value = LogicArray("01X0")

    class Dut:
        o__payload = Handle()

    io = CocotbIO(Dut())
    io.cycle = 7
    with pytest.raises(UndefinedValue) as caught:
        io.get("o__payload")
    assert (caught.value.signal, caught.value.cycle, caught.value.bits) == ("o__payload", 7, [1])
    Handle.value = LogicArray("0110")
    assert io.get("o__payload") == 6
