"""The gpurtl command line: normal use and clear errors for bad input."""

import json
import re
from pathlib import Path

import pytest

from gpurtl.sim.tools.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_blocks_params_and_interfaces(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert "waitcnt  (cycle-stepped)" in out and "generation=gfx12" in out and "in  (" in out


def test_check_ends_with_the_count_line(capsys):
    code, out, _ = run(capsys, "check", "waitcnt", "-p", "waves=2", "--count", "300")
    assert code == 0
    assert out.strip().splitlines()[-1] == "300 passed, 0 failed"


def test_run_writes_outputs_and_agrees_with_golden(tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    lines = [
        {"issue": {"valid": 1, "wave": 1, "cls": "VMEM_LOAD"}},
        {"wait": {"valid": 1, "wave": 1, "word": 0xBFC00000}},  # s_wait_loadcnt 0
        {},
        {"ret": {"load": {"valid": 1, "wave": 1}}},
        {},
    ]
    source.write_text("# per-cycle events\n" + "\n".join(json.dumps(x) for x in lines) + "\n")
    target = tmp_path / "out.jsonl"
    code, _, err = run(
        capsys, "run", "waitcnt", "-p", "waves=2", "--input", str(source), "--output", str(target)
    )
    assert code == 0, err
    outputs = [json.loads(line) for line in target.read_text().splitlines()]
    assert [o["stall"] for o in outputs] == [0, 0, 2, 2, 0]
    assert "5 passed, 0 failed" in err


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"issue": {"valid": 1, "wave": 1, "cls": 0}}\n{"issue": ', "in.jsonl:2: not valid JSON"),
        (
            '{"issue": {"valid": 1, "wave": 9, "cls": 0}}\n',
            "in.jsonl:1: field `issue.wave`: must be in 0..1",
        ),
        (
            '{"issue": {"valid": 1, "wave": 0, "cls": "LOADX"}}\n',
            "field `issue.cls`: must be one of",
        ),
        ('{"isue": {"valid": 1}}\n', "in.jsonl:1: unknown field `isue`"),
        ("[1, 2]\n", "in.jsonl:1: each line must be a JSON object"),
        ("\n", "no transactions"),
    ],
)
def test_bad_input_is_one_clear_line_exit_2_and_no_output(tmp_path, capsys, content, message):
    source = tmp_path / "in.jsonl"
    source.write_text(content)
    target = tmp_path / "out.jsonl"
    code, out, err = run(
        capsys, "run", "waitcnt", "-p", "waves=2", "--input", str(source), "--output", str(target)
    )
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1
    assert not target.exists()
    assert list(tmp_path.iterdir()) == [source]


@pytest.mark.parametrize(
    "argv, message",
    [
        (("check", "waitcnts"), "unknown block `waitcnts`; did you mean waitcnt"),
        (
            ("check", "waitcnt", "-p", "waves=0"),
            "parameter `waves` must be an integer from 1 to 64",
        ),
        (("check", "waitcnt", "-p", "generation=gfx13"), "parameter `generation` must be one of"),
        (("check", "waitcnt", "-p", "wavs=2"), "block `waitcnt` has no parameter `wavs`"),
        (("check", "waitcnt", "-p", "waves"), "must be written name=value"),
        (("run", "waitcnt", "--input", "/nonexistent/in.jsonl"), "cannot read"),
        (
            ("check", "waitcnt_mem", "-p", "hit_latency=50", "-p", "miss_latency=10"),
            "must not exceed `miss_latency`",
        ),
    ],
)
def test_user_mistakes_exit_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_missing_input_file_for_missing_field_without_default(tmp_path, capsys):
    from gpurtl.sim.core.jsonio import InputError, read_jsonl

    from ..toy import IN

    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1, "b": 2, "f": 1.5}\n{"a": 1, "f": "3f800000"}\n')
    with pytest.raises(InputError, match=r"t.jsonl:2: field `b`: is missing"):
        read_jsonl(path, IN)
    path.write_text('{"a": 1, "b": 2, "f": "0x3F80000"}\n')
    with pytest.raises(InputError, match=r"t.jsonl:1: field `f` must be a number or 8 hex"):
        read_jsonl(path, IN)
    path.write_text('{"a": 1, "b": 2, "f": -0.0}\n{"a": 1, "b": 2, "f": "0x7fc00000"}\n')
    values = read_jsonl(path, IN)
    assert [v["f"] for v in values] == [0x80000000, 0x7FC00000]


def test_export_writes_verilog(tmp_path, capsys):
    target = tmp_path / "w.v"
    code, _, err = run(capsys, "export", "waitcnt", "-p", "waves=2", "-o", str(target))
    assert code == 0
    text = target.read_text()
    assert "module waitcnt" in text and "input clk" in text.replace("  ", " ")


def test_run_ray_accel_on_a_user_written_instruction(tmp_path, capsys):
    """`gpurtl run ray_accel --input`: one hand-written BVH8 intersect instruction (floats for the
    ray, node bytes from the package's encoder) through the smallest box-path build; the expected order
    is worked out by hand, not by the models."""
    from gpurtl.golden.ray_accel.encode.box_node import encode_box8

    boxes = [
        ((5, 0, 0), (6, 1, 1)),
        ((1, 0, 0), (2, 1, 1)),
        ((3, 0, 0), (4, 1, 1)),
        ((1, 10, 0), (2, 11, 1)),
    ]  # far, near, middle, off the ray
    floats = [([float(v) for v in lo], [float(v) for v in hi]) for lo, hi in boxes]
    node = encode_box8(
        [{"min": lo, "max": hi, "type": 5} for lo, hi in floats], internal_base=0x1000
    )
    instruction = {
        "ray": {"origin": [0.0, 0.5, 0.5], "dir": [1.0, 0.0, 0.0]},
        "node_ptr": [0x2005, 0],
        "node": [node, [0] * 32],
        "desc": {"heuristic": 0, "sort_en": 1},
    }
    source = tmp_path / "mine.jsonl"
    source.write_text(json.dumps(instruction) + "\n")
    target = tmp_path / "out.jsonl"
    code, _, err = run(
        capsys,
        "run",
        "ray_accel",
        "-p",
        "engines=1",
        "-p",
        "boxes_per_engine=1",
        "-p",
        "triangles=0",
        "-p",
        "transforms=0",
        "--input",
        str(source),
        "--output",
        str(target),
    )
    assert code == 0, err
    assert "1 passed, 0 failed" in err
    (out,) = [json.loads(line) for line in target.read_text().splitlines()]
    # gpurt QuantizedBVH8BoxNode::Decode: box children take internal_base | 5, each advancing by
    # range (1) x 16 bytes
    ptr = [0x1000 + 16 * k | 5 for k in range(4)]
    dw = [int(v, 16) if isinstance(v, str) else v for v in out["dw"]]
    assert out["status"] == 0
    assert dw[:8] == [ptr[1], ptr[2], ptr[0]] + [0xFFFFFFFF] * 5  # closest first, misses -1
    # The README's claim of how a miss looks in the output is what the output holds.
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    claim = re.search(r"misses print as (\S+)", readme).group(1)
    assert f", {claim}," in target.read_text()


@pytest.mark.parametrize(
    "module, function, argv",
    [
        ("gpurtl.sim.backends.fast.run", "build_model", ["check", "fp32_add", "--backend", "fast"]),
        ("gpurtl.sim.tools.synth", "synthesize", ["synth", "fp32_add"]),
    ],
)
def test_a_failed_tool_is_reported_without_a_traceback(capsys, monkeypatch, module, function, argv):
    """A Verilator build or a Yosys/nextpnr run that fails prints the tool's message and the tail
    of its log, exits 1, and shows no Python traceback."""
    import importlib

    from gpurtl.sim.backends.fast.build import BuildError
    from gpurtl.sim.tools.synth import SynthError

    error = BuildError if function == "build_model" else SynthError

    def fail(*args, **kwargs):
        raise error("the tool failed (log: build.log)\n%Error: top.v:3: syntax error")

    monkeypatch.setattr(importlib.import_module(module), function, fail)
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert "gpurtl: the tool failed (log: build.log)" in err and "syntax error" in err
    assert "Traceback" not in err + out


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator  # the key names the C++ compiler
def test_verilator_builds_are_kept_apart_per_environment(monkeypatch, tmp_path):
    """A cocotb model built from one virtual environment is not reused from another: its make
    dependency files name the first environment's files, and make fails once those are gone."""
    from gpurtl.sim.backends import verilator

    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    here = verilator._build_folder("fp32_add", "module fp32_add; endmodule\n", False)
    assert str(verilator._toolchain()).count("|") == 4  # cocotb, versions, verilator, c++
    monkeypatch.setattr(verilator, "_toolchain", lambda: "/elsewhere/.venv/cocotb|2.1.0|5.48.0|")
    elsewhere = verilator._build_folder("fp32_add", "module fp32_add; endmodule\n", False)
    assert here != elsewhere and here.parent == elsewhere.parent
