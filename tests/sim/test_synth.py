"""`gpurtl synth` on a small unit: place-and-route figures, and the synthesis-only estimate
agrees with them (the estimate is what the README gives for designs larger than the device)."""

import pytest

from gpurtl.sim import registry
from gpurtl.sim.synth import _last_step, critical_path, synthesize


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


def test_bad_device_is_refused():
    block = registry.get("fp32_cmp")
    with pytest.raises(ValueError, match="`device` must be one of"):
        synthesize(block, block.resolve({}), device="xc7a35t")


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
