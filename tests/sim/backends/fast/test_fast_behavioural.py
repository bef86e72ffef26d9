"""The fast backend's behavioural FP32 cores (``fast-behavioural``): each unit against the golden
model, and the same ray accelerator stimulus on the RTL cores and on the behavioural ones, every
output and every cycle compared."""

import numpy as np
import pytest

from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.backends.fast import check
from gpurtl.sim.backends.fast.behavioural import PLATFORM, verilog_library
from gpurtl.sim.backends.fast.build import model
from gpurtl.sim.backends.fast.run import run_rows, write_stimulus
from gpurtl.sim.core import registry

UNITS = ["add", "mul", "fma", "cmp", "minmax", "rcp", "div", "f2i", "i2f"]

#: sha256 of the C++ of the behavioural cores for two tops: the package data files with the
#: config header give exactly this text, so a change of it (and of the models' cache keys) is
#: one made on purpose, with these values.
CXX_SHA256 = {
    "rt_unit": "35e52115a0894fa571e7b08ad5f5434a50a895a4c7867a2644bcfc5fd1e0306a",
    "batch_fp32_add": "bfcf1ea348faa56c57c213208e3d397d3e6939300b3707c0b3d695787ebc9cef",
}


@pytest.mark.parametrize("top", sorted(CXX_SHA256))
def test_the_cores_cxx_is_the_package_file_with_its_config_header(top):
    import hashlib

    from gpurtl.sim.backends.fast import behavioural

    files = behavioural.cxx_files(top)
    assert set(files) == {"fp32_dpi.cpp", "fp32_ops.h", "fp32_config.h"}
    assert files["fp32_config.h"] == f'#include "V{top}__Dpi.h"'
    assert f"V{top}" not in files["fp32_dpi.cpp"]  # the fixed part names no top
    text = behavioural.cxx_source(top)
    assert hashlib.sha256(text.encode()).hexdigest() == CXX_SHA256[top]


def test_every_stand_in_has_a_black_box_and_keeps_latency_and_ports():
    from amaranth.back import rtlil

    from gpurtl.hdl.fp32 import FPFMACore, FPToIntCore

    library = verilog_library()
    for unit in UNITS:
        assert f"module gpurtl_fp32_{unit} " in library
        assert f"gpurtl_fp32_{unit}_dpi(line, " in library
    assert "initial line = gpurtl_fp32_line(STAGES - 1);" in library
    core = FPFMACore(stages=7, ftz=True)
    text = rtlil.convert(core, platform=PLATFORM, name="top")
    assert "gpurtl_fp32_fma" in text and "STAGES" in text
    assert core.latency == 7
    # a combinational core stays RTL (no black box in a chain of compares)
    assert "gpurtl_fp32" not in rtlil.convert(FPToIntCore(stages=0), platform=PLATFORM)
    assert BACKENDS["fast-behavioural"].fp_cores == "behavioural"
    assert BACKENDS["fast"].fp_cores == "rtl"


@pytest.mark.verilator
@pytest.mark.parametrize("unit, ftz", [("fma", True), ("add", False)])
def test_behavioural_units_agree_with_golden(unit, ftz):
    block = registry.get(f"fp32_{unit}")
    params = block.resolve({"ftz": str(ftz)})
    report = check(block, params, count=20_000, seed=5, fp_cores="behavioural")
    assert report.fp_cores == "behavioural"
    assert (report.passed, report.failed, report.latency_errors) == (20_000, 0, 0), str(
        report.first
    )
    assert "behavioural FP32 cores" in report.phases()


@pytest.mark.slow
@pytest.mark.verilator
@pytest.mark.parametrize("ftz", [False, True])
@pytest.mark.parametrize("unit", UNITS)
def test_million_vectors_behavioural(unit, ftz):
    """The same 10^6-vector check as the RTL units' (tests/sim/backends/fast/test_fastsim.py), on the
    behavioural cores, with and without ``ftz``."""
    block = registry.get(f"fp32_{unit}")
    params = block.resolve({"ftz": str(ftz)})
    report = check(block, params, count=1_000_000, seed=11, fp_cores="behavioural")
    assert (report.passed, report.failed) == (1_000_000, 0), str(report.first)


def _same_run_on_both(block, params, count, tmp_path, top="batch"):
    """The records (outputs, accept and emit cycles) and summaries of one stimulus under stalls
    on the RTL cores and on the behavioural ones."""
    in_path, expected_path = tmp_path / "in.bin", tmp_path / "expected.bin"
    write_stimulus(block, params, 17, count, in_path, expected_path)
    runs = {}
    for fp_cores in ("rtl", "behavioural"):
        built = model(block, params, top=top, fp_cores=fp_cores)
        assert built.fp_cores == fp_cores
        work = tmp_path / fp_cores
        work.mkdir()
        ((_, _, out_path, summary),) = run_rows(
            built,
            in_path,
            count,
            seed=3,
            p_valid=0.7,
            p_ready=0.6,
            free_run=count // 5,  # the exact-latency stretch
            processes=1,
            work=work,
        )
        runs[fp_cores] = (out_path.read_bytes(), summary)
    return runs


@pytest.mark.slow  # two Verilator builds of a ray accelerator with every path
@pytest.mark.verilator
def test_ray_accel_rtl_and_behavioural_cores_agree_every_cycle(tmp_path):
    block = registry.get("ray_accel")
    params = block.resolve({"engines": "1", "boxes_per_engine": "1"})  # every node kind
    count = 3000
    runs = _same_run_on_both(block, params, count, tmp_path)
    rtl, behavioural = runs["rtl"], runs["behavioural"]
    words = len(rtl[0]) // 4 // count
    assert len(rtl[0]) == len(behavioural[0]) == 4 * words * count
    records = {k: np.frombuffer(v[0], dtype="<u4").reshape(count, words) for k, v in runs.items()}
    differ = np.flatnonzero((records["rtl"] != records["behavioural"]).any(axis=1))
    assert differ.size == 0, f"first differing record: {differ[:1]}"
    assert rtl[1] == behavioural[1]
    assert rtl[1]["latency_errors"] == 0 and rtl[1]["cycles"] > count


@pytest.mark.verilator
@pytest.mark.parametrize("name", ["fp32_fma", "fp32_div"])
def test_stalled_top_rtl_and_behavioural_cores_agree_every_cycle(name, tmp_path):
    """On the ``stalled`` top the cores' ``en`` follows the output stalls, so the behavioural
    delay line (a ring in the C++ and one register) must hold exactly when the RTL stages do."""
    block = registry.get(name)
    params = block.resolve()
    count = 4000
    runs = _same_run_on_both(block, params, count, tmp_path, top="stalled")
    rtl, behavioural = runs["rtl"], runs["behavioural"]
    assert len(rtl[0]) == len(behavioural[0]) > 0
    assert rtl[0] == behavioural[0]
    assert rtl[1] == behavioural[1]
    assert rtl[1]["latency_errors"] == 0 and rtl[1]["cycles"] > count
