"""The ``icarus`` backend's refusals, checked before any simulation: no Icarus Verilog on PATH is
one line naming what to install (exit 2), a waveform is refused, and ``gpurtl bench`` measures
it only when named. Its runs are in tests/sim/backends/test_conformance.py (``verilator`` tier)."""

import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry
from gpurtl.sim.core.export import ToolchainError
from gpurtl.sim.tools.bench import BENCH_ROWS, default_rows
from gpurtl.sim.tools.cli import main


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_icarus(monkeypatch, tmp_path):
    """A PATH without iverilog and vvp (the virtual environment's folders stay first on the
    PATH that the backend searches)."""
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.mark.parametrize(
    "argv",
    [
        ("check", "fp32_add", "--backend", "icarus", "--count", "10"),
        ("run", "fp32_add", "--backend", "icarus", "--input", "in.jsonl"),
        ("bench", "fp32_add", "--backends", "pysim,icarus"),
    ],
)
def test_missing_icarus_is_one_line_and_exit_2(capsys, no_icarus, tmp_path, argv):
    (tmp_path / "in.jsonl").write_text('{"a": 0, "b": 0}\n')
    code, out, err = run(capsys, *[tmp_path / a if a == "in.jsonl" else a for a in argv])
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err + out
    assert "needs Icarus Verilog" in err and "apt-get install iverilog" in err
    assert "not found: iverilog, vvp" in err


def test_a_session_without_icarus_names_what_to_install(no_icarus):
    block = registry.get("fp32_add")
    with pytest.raises(ToolchainError, match="apt-get install iverilog"):
        BACKENDS["icarus"].session(block, block.resolve())


def test_icarus_writes_no_waveform(capsys, tmp_path):
    code, _, err = run(
        capsys, "check", "fp32_add", "--backend", "icarus", "--vcd", tmp_path / "w.vcd"
    )
    assert code == 2 and "the icarus backend writes no waveform" in err, err
    assert not (tmp_path / "w.vcd").exists()


def test_bench_measures_icarus_only_when_named():
    assert "icarus" in BENCH_ROWS and "icarus" not in default_rows()
    assert {"pysim", "verilator", "fast-batch"} <= set(default_rows())
