"""The outside user's example of ``docs/outside.md``: a self-written cocotb testbench
(``examples/icarus_fp32_add.py``) drives ``gpurtl export``'s Verilog on Icarus Verilog and
agrees with ``gpurtl run``'s outputs; with one expected output changed it fails."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpurtl.sim.tools.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "icarus_fp32_add.py"

pytestmark = pytest.mark.skipif(
    shutil.which("iverilog") is None,
    reason="Icarus Verilog (`iverilog`) is not installed (Debian: apt-get install iverilog)",
)


def _example(folder, expected):
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "fp32_add.v", "in.jsonl", expected],
        cwd=folder,
        capture_output=True,
        text=True,
    )


def test_example_testbench_agrees_with_gpurtl_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", "fp32_add", "-o", "fp32_add.v"]) == 0
    assert main(["stimulus", "fp32_add", "--count", "60", "--seed", "3", "-o", "in.jsonl"]) == 0
    assert main(["run", "fp32_add", "--input", "in.jsonl", "-o", "expected.jsonl"]) == 0
    result = _example(tmp_path, "expected.jsonl")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 of 1 cocotb tests passed" in result.stdout

    lines = Path("expected.jsonl").read_text().splitlines()
    wrong = json.loads(lines[17])
    wrong["z"] = f"{int(wrong['z'], 0) ^ 1:#010x}"
    lines[17] = json.dumps(wrong)
    Path("wrong.jsonl").write_text("\n".join(lines) + "\n")
    result = _example(tmp_path, "wrong.jsonl")
    assert result.returncode == 1
    assert "output 17" in result.stdout + result.stderr
