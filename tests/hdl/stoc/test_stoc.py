"""Lockstep checks of the STOC blocks (`stoc`, `omm_index`) against their golden models."""

import gc
import re
import warnings

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Fragment, Module, UnusedElaboratable

from gpurtl.hdl.stoc.omm_index import OMMIndex
from gpurtl.hdl.stoc.stoc import STOCUnit
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import export, registry
from gpurtl.sim.harness import golden_io


def _check(name, count, backend="pysim", seed=0, **overrides):
    block = registry.get(name)
    params = block.resolve(overrides)
    report = BACKENDS[backend].check(block, params, count=count, seed=seed)
    assert report.failed == 0 and report.passed == count, f"{report.line()}: {report.first}"
    return report


def test_stoc_lockstep_pysim():
    _check("stoc", 1500)


@pytest.mark.parametrize(
    "overrides",
    [
        {"plane_order": "corners"},
        {"both_planes": "ut"},
        {"both_planes": "opaque"},
        {"both_planes": "transparent"},
        {"frac_bits": 16},
        {"frac_bits": 12},
    ],
)
def test_stoc_lockstep_pysim_parameters(overrides):
    _check("stoc", 300, seed=1, **overrides)


@pytest.mark.parametrize("frac_bits", [24, 13])
def test_omm_index_lockstep_pysim(frac_bits):
    _check("omm_index", 1000 if frac_bits == 24 else 300, frac_bits=frac_bits)


@pytest.mark.parametrize("name", ["stoc", "omm_index"])
def test_initiation_interval_is_one(name):
    # with no stalls, n transactions leave in n + latency cycles: one accepted every cycle
    block = registry.get(name)
    params = block.resolve()
    inputs = block.stimulus(np.random.default_rng(4), 200, **params)
    expected = golden_io.golden_outputs(block, params, inputs)
    report = BACKENDS["pysim"].run(block, params, inputs, expected=expected)
    assert report.failed == 0 and report.passed == 200
    dut = block.build(**params)
    Fragment.get(dut, None)  # (marks the component used)
    assert report.cycles == 200 + dut.latency


def test_latency_and_parameter_validation():
    for dut in (STOCUnit(), OMMIndex()):
        assert dut.latency == 3
        Fragment.get(dut, None)
    with pytest.raises(TypeError, match="`frac_bits` must be an integer from 12 to 24, not 25"):
        OMMIndex(frac_bits=25)
    with pytest.raises(ValueError, match="`plane_order` must be one of"):
        STOCUnit(plane_order="zigzag")
    with pytest.raises(ValueError, match="`both_planes` must be one of"):
        STOCUnit(both_planes="maybe")
    with pytest.raises(registry.RegistryError):
        registry.get("stoc").resolve({"frac_bits": "30"})


def test_refused_build_leaves_no_unused_component():
    # Parameters are checked before the component exists: nothing is left to warn about.
    # Amaranth stays silent about unused elaboratables until the process first elaborates one.
    Fragment.get(_Probe(), None)
    gc.collect()  # other tests' garbage in this process warns now, not inside the record
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for build in (lambda: OMMIndex(frac_bits=25), lambda: STOCUnit(plane_order="zigzag")):
            with pytest.raises((TypeError, ValueError)):
                build()
        gc.collect()
        assert [w for w in caught if issubclass(w.category, UnusedElaboratable)] == []
        _Probe()  # the record does catch an elaboratable built and never used
        gc.collect()
        assert [w for w in caught if issubclass(w.category, UnusedElaboratable)] != []


class _Probe(Elaboratable):
    def elaborate(self, platform):
        return Module()


# Yosys' Verilog writer trims constants and compares/shifts mixed widths everywhere in Amaranth
# output; those two width codes are waived here (on top of export.LINT_WAIVERS), any other
# warning fails the test.
_WIDTH_CODES = ("WIDTHEXPAND", "WIDTHTRUNC")


def test_verilog_lint():
    for name in ("stoc", "omm_index"):
        block = registry.get(name)
        text = export.to_verilog(block, block.resolve())
        codes = set(re.findall(r"%(?:Warning|Error)-(\w+)", export.lint(text, name)[1]))
        assert codes <= set(_WIDTH_CODES), codes


@pytest.mark.slow  # another Verilator build; `make test-verilator` runs every block once
@pytest.mark.verilator
def test_stoc_lockstep_verilator():
    _check("stoc", 1500, backend="verilator", seed=2)


@pytest.mark.slow
@pytest.mark.verilator
def test_omm_index_lockstep_verilator():
    _check("omm_index", 3000, backend="verilator", seed=3)


@pytest.mark.slow
def test_stoc_lockstep_pysim_long():
    _check("stoc", 20000, seed=7)
