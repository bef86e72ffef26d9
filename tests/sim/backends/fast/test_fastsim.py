"""The fast backend (compiled model + C++ batch driver): agreement with the golden model, the
batch top against the block itself, and that wrong outputs and wrong latencies are reported."""

import numpy as np
import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.fast import BatchTop, check, run_transactions
from gpurtl.sim.backends.fast.build import model
from gpurtl.sim.backends.fast.run import run_rows
from gpurtl.sim.core import layouts, registry
from gpurtl.sim.core.words import ints_from_words, words_from_ints
from gpurtl.sim.harness import golden_io
from gpurtl.sim.harness.engine import StallPattern
from gpurtl.sim.harness.golden_io import batches

from ...toy import IN, OUT, ToyAdder, toy_block

SMALLEST_RAY_ACCEL = {"engines": "1", "boxes_per_engine": "1", "triangles": "0", "transforms": "0"}


def _fp32_add():
    block = registry.get("fp32_add")
    return block, block.resolve()


# -- the batch top on Amaranth's simulator (no compiler involved) ------------------------------


def test_batch_top_is_the_block_plus_one_cycle_under_stalls():
    block = toy_block()
    params = block.resolve({"stages": "4"})
    wrapped = registry.Block(
        name="toy_batch",
        doc="",
        kind="pipeline",
        build=lambda stages: BatchTop(ToyAdder(stages), IN, OUT),
        golden=block.golden,
        layouts=block.layouts,
        stimulus=block.stimulus,
        params=block.params,
    )
    assert BatchTop(ToyAdder(4), IN, OUT).latency == 5
    assert BatchTop(ToyAdder(4), IN, OUT).depth == 6
    report = BACKENDS["pysim"].check(wrapped, params, count=800, seed=3)
    assert (report.passed, report.failed, report.latency_errors) == (800, 0, 0)
    # No stalls: one transaction per cycle through the wrapper, exactly one cycle later.
    inputs = block.stimulus(np.random.default_rng(0), 100, **params)
    report = BACKENDS["pysim"].run(
        wrapped,
        params,
        inputs,
        expected=golden_io.golden_outputs(block, params, inputs),
        stalls=StallPattern(free_run=100),
    )
    assert report.failed == 0
    assert report.cycles == 100 + 5


def test_batch_top_refuses_a_block_without_latency():
    with pytest.raises(TypeError, match="`dut` must be a pipeline"):
        BatchTop(object(), IN, OUT)


# -- packed rows ----------------------------------------------------------------------------


def test_words_round_trip_and_fallback_matches_the_scalar_stimulus():
    values = [0, 1, (1 << 70) - 1, 0x1234_5678_9ABC_DEF0_1357]
    rows = words_from_ints(71, values)
    assert rows.shape == (4, 3) and rows.dtype == np.uint32
    assert rows[3, 0] == 0xDEF0_1357 and rows[3, 2] == 0x1234  # word 0 = bits 0..31
    assert ints_from_words(rows) == values
    block, params = _fp32_add()
    in_layout, out_layout = block.layouts(**params)
    ((rows, golden),) = batches(block, params, np.random.default_rng(5), 300)
    dicts = block.stimulus(np.random.default_rng(5), 300, **params)
    assert ints_from_words(rows) == [layouts.pack(in_layout, d) for d in dicts]
    assert ints_from_words(golden) == [
        layouts.pack(out_layout, d) for d in golden_io.golden_outputs(block, params, dicts)
    ]


@pytest.mark.verilator
def test_registry_hooks_are_used():
    """A block's own ``stimulus_words`` / ``golden_words`` feed the fast backend; a wrong
    ``golden_words`` makes the check fail."""
    import dataclasses

    block, params = _fp32_add()
    calls = []

    def stimulus_words(rng, count, **params):
        calls.append(count)
        rows = np.zeros((count, 3), dtype=np.uint32)
        rows[:, 0] = 0x3F800000  # 1.0 + 1.0
        rows[:, 1] = 0x3F800000
        return rows

    def golden_words(words, **params):
        out = np.zeros((len(words), 1), dtype=np.uint32)
        out[:, 0] = 0x40000000  # 2.0
        out[7, 0] = 0x40400000  # a wrong expectation: 3.0
        return out

    _, out_layout = block.layouts(**params)
    assert layouts.leaves(out_layout)[0].width == 32
    hooked = dataclasses.replace(block, stimulus_words=stimulus_words, golden_words=golden_words)
    report = check(hooked, params, count=50, seed=1)
    assert calls == [50]
    assert (report.passed, report.failed) == (49, 1)
    assert report.first.where.startswith("transaction 7 ")
    assert "0x40400000" in report.first.expected and "0x40000000" in report.first.got


# -- the compiled model ----------------------------------------------------------------------


@pytest.mark.verilator
@pytest.mark.parametrize("top", ["batch", "stalled"])
def test_fp32_add_agrees_with_golden(top):
    block, params = _fp32_add()
    report = check(block, params, count=30_000, seed=2, top=top)
    assert (report.passed, report.failed, report.latency_errors) == (30_000, 0, 0), str(
        report.first
    )
    assert report.processes == 2
    assert report.cycles > 30_000 + 2 * 9  # random stalls after the free-running tenth


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_stalled_and_batch_tops_give_identical_outputs():
    block, params = _fp32_add()
    ((rows, _),) = batches(block, params, np.random.default_rng(7), 2000)
    bits = ints_from_words(rows)
    got = {
        top: run_transactions(
            block,
            params,
            bits,
            seed=4,
            p_valid=0.6,
            p_ready=0.5,
            free_run=100,
            top=top,
            keep_outputs=True,
        )
        for top in ("batch", "stalled")
    }
    assert len(got["batch"].outputs) == 2000
    assert got["batch"].outputs == got["stalled"].outputs
    assert got["batch"].latency_errors == got["stalled"].latency_errors == 0


@pytest.mark.verilator
def test_one_evaluation_per_cycle_matches_the_two_evaluation_driver(tmp_path):
    """The batch top's one-evaluation driver (the default) against the two-evaluation driver of
    the same design: the same outputs, accept and emit cycles, under stalls and free running."""
    block, params = _fp32_add()
    ((rows, _),) = batches(block, params, np.random.default_rng(11), 3000)
    in_path = tmp_path / "in.bin"
    rows.astype("<u4").tofile(in_path)
    runs = {}
    for evals in (1, 2):
        built = model(block, params, top="batch", evals=evals)
        assert built.evals == evals
        work = tmp_path / f"evals{evals}"
        work.mkdir()
        ((_, _, out_path, summary),) = run_rows(
            built,
            in_path,
            3000,
            seed=9,
            p_valid=0.6,
            p_ready=0.5,
            free_run=300,
            processes=1,
            work=work,
        )
        runs[evals] = (out_path.read_bytes(), summary)
    assert len(runs[1][0]) == 3000 * 4 * (1 + 4)  # one output word, two 64-bit cycle numbers
    assert runs[1][0] == runs[2][0]
    assert runs[1][1] == runs[2][1]
    assert runs[1][1]["latency_errors"] == 0 and runs[1][1]["cycles"] > 3000
    assert model(block, params, top="batch").evals == 1  # the default of the batch top
    with pytest.raises(ValueError, match="two evaluations"):
        model(block, params, top="stalled", evals=1)


def test_both_edges_refuses_a_design_it_cannot_clock():
    from gpurtl.sim.backends.fast.driver import both_edges

    assert both_edges("always @(posedge clk) x <= y;") == "always @(edge clk) x <= y;"
    with pytest.raises(ValueError, match="posedge clk"):
        both_edges("always @(negedge clk) x <= y;")


@pytest.mark.verilator
def test_wrong_expectation_is_reported_with_field_and_cycles():
    block, params = _fp32_add()
    in_layout, out_layout = block.layouts(**params)
    ((rows, golden),) = batches(block, params, np.random.default_rng(3), 500)
    expected = ints_from_words(golden)
    expected[123] ^= 1 << 31  # the sign of one result
    report = run_transactions(
        block,
        params,
        ints_from_words(rows),
        expected,
        seed=1,
        p_valid=0.7,
        p_ready=0.7,
        free_run=50,
    )
    assert (report.passed, report.failed) == (499, 1)
    assert report.first.field == layouts.leaves(out_layout)[0].path
    assert report.first.where.startswith("transaction 123 (accepted cycle ")


@pytest.mark.verilator
def test_latency_violation_is_reported(tmp_path):
    """The driver's exact latency check: claim one cycle less than the model takes."""
    block, params = _fp32_add()
    compiled = model(block, params, top="batch")
    ((rows, _),) = batches(block, params, np.random.default_rng(3), 400)
    path = tmp_path / "in.bin"
    rows.tofile(path)
    compiled.latency -= 1
    ((first, size, _, summary),) = run_rows(
        compiled, path, 400, free_run=40, processes=1, work=tmp_path
    )
    assert summary["latency_errors"] == 40 and summary["first_latency_error"] == 0
    compiled.latency += 1
    ((first, size, _, summary),) = run_rows(
        compiled, path, 400, free_run=40, processes=1, work=tmp_path
    )
    assert summary["latency_errors"] == 0


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_ray_sort_and_run_block():
    block = registry.get("ray_sort")
    params = block.resolve()
    report = BACKENDS["fast"].check(block, params, count=3000, seed=1)
    assert (report.passed, report.failed) == (3000, 0), str(report.first)
    inputs = block.stimulus(np.random.default_rng(2), 20, **params)
    expected = golden_io.golden_outputs(block, params, inputs)
    report = BACKENDS["fast"].run(block, params, inputs, expected=expected, keep_outputs=True)
    _, out_layout = block.layouts(**params)
    assert report.outputs == [layouts.pack(out_layout, value) for value in expected]


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_smallest_ray_accel():
    block = registry.get("ray_accel")
    params = block.resolve(SMALLEST_RAY_ACCEL)
    report = BACKENDS["fast"].check(block, params, count=400, seed=1)
    assert (report.passed, report.failed, report.latency_errors) == (400, 0, 0), str(report.first)


@pytest.mark.verilator
def test_cli_check_and_run_on_fast(tmp_path, capsys):
    from gpurtl.sim.tools.cli import main

    assert main(["check", "fp32_add", "--backend", "fast", "--count", "2000"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("2000 passed, 0 failed") and "batch top" in out
    source = tmp_path / "in.jsonl"
    assert main(["stimulus", "fp32_add", "--count", "5", "-o", str(source)]) == 0
    target = tmp_path / "out.jsonl"
    assert (
        main(
            [
                "run",
                "fp32_add",
                "--backend",
                "fast",
                "--input",
                str(source),
                "--output",
                str(target),
            ]
        )
        == 0
    )
    assert len(target.read_text().splitlines()) == 5
    assert "golden model agreement: 5 passed, 0 failed" in capsys.readouterr().err


def test_dedupe_modules_merges_identical_instances():
    from gpurtl.sim.core.export import dedupe_modules

    leaf = (
        '(* generator = "Amaranth" *)\nmodule \\\\top.{name} (a, y);\n  input a;\n'
        "  output y;\n  assign y = {body};\nendmodule\n"
    )
    mid = (
        "module \\\\top.{name} (a, y);\n  input a;\n  output y;\n"
        "  \\\\top.{name}.x  x (\n    .a(a),\n    .y(y)\n  );\nendmodule\n"
    )
    text = (
        "/* header */\n\n(* top =  1  *)\nmodule top(a, y);\n  input a;\n  output [1:0] y;\n"
        "  \\\\top.m0  m0 (.a(a), .y(y[0]));\n  \\\\top.m1  m1 (.a(a), .y(y[1]));\n"
        "endmodule\n"
        + mid.format(name="m0")
        + leaf.format(name="m0.x", body="~a")
        + mid.format(name="m1")
        + leaf.format(name="m1.x", body="~a")
    )
    merged_text, merged = dedupe_modules(text)
    assert merged == 2  # m1.x into m0.x, then m1 into m0
    assert merged_text.count("\nmodule ") == 3
    assert "\\top.m0  m1 (" in merged_text and "\\top.m1 " not in merged_text
    different = text.replace("assign y = ~a;\nendmodule\n", "assign y = a;\nendmodule\n", 1)
    assert dedupe_modules(different)[1] == 0  # bodies differ: nothing merged


def test_dedupe_modules_ignores_tool_numbering_and_port_order():
    from gpurtl.sim.core.export import dedupe_modules

    # Two copies of one unit as Yosys writes them: its made-up names are numbered design-wide
    # and the header lists the ports in order of first use.
    unit = (
        "module \\\\top.{name} ({ports});\n  reg \\$auto$verilog_backend.cc:2355:dump_module${n}  = 0;\n"
        "  input a;\n  input b;\n  output y;\n  wire \\$auto$rtlil.cc:2739:Not${m} ;\n"
        "  assign \\$auto$rtlil.cc:2739:Not${m}  = ~a;\n  assign y = \\$auto$rtlil.cc:2739:Not${m}  & {rhs};\n"
        "endmodule\n"
    )
    top = (
        "(* top =  1  *)\nmodule top(a, b, y);\n  input a;\n  input b;\n  output [1:0] y;\n"
        "  \\\\top.u0  u0 (.a(a), .b(b), .y(y[0]));\n  \\\\top.u1  u1 (.a(a), .b(b), .y(y[1]));\n"
        "endmodule\n"
    )
    text = (
        top
        + unit.format(name="u0", ports="a, b, y", n=7, m=12, rhs="b")
        + unit.format(name="u1", ports="b, a, y", n=9, m=40, rhs="b")
    )
    merged_text, merged = dedupe_modules(text)
    assert merged == 1
    assert "\\top.u0  u1 (" in merged_text and "module \\top.u1 " not in merged_text
    # A real difference (the right-hand side) keeps them apart, whatever the numbering.
    other = (
        top
        + unit.format(name="u0", ports="a, b, y", n=7, m=12, rhs="b")
        + unit.format(name="u1", ports="b, a, y", n=9, m=40, rhs="a")
    )
    assert dedupe_modules(other)[1] == 0
    # Within one module, two made-up names stay two names.
    # Within a module, two made-up names stay two names: y = n0 & n1 differs from y = n0 & n0.
    two_names = (
        top
        + unit.format(name="u0", ports="a, b, y", n=7, m=12, rhs="\\$auto$rtlil.cc:2739:Not$13 ")
        + unit.format(name="u1", ports="a, b, y", n=9, m=40, rhs="\\$auto$rtlil.cc:2739:Not$40 ")
    )
    assert dedupe_modules(two_names)[1] == 0


MILLION_BLOCKS = [
    "fp32_add",
    "fp32_mul",
    "fp32_fma",
    "fp32_cmp",
    "fp32_minmax",
    "fp32_rcp",
    "fp32_div",
    "fp32_f2i",
    "fp32_i2f",
    "ray_sort",
    "stoc",
    "omm_index",
    "obb_transform",
    "instance_transform",
    "ray_primitive_decode",
]


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.parametrize("name", MILLION_BLOCKS)
def test_million_vectors_fast(name):
    """10^6 random transactions per pipeline block on the fast backend (about a minute each,
    most of it in the golden model)."""
    block = registry.get(name)
    report = check(block, block.resolve(), count=1_000_000, seed=11)
    assert (report.passed, report.failed) == (1_000_000, 0), str(report.first)
