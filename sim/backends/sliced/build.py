"""Compiled models of the sliced backend: export, synthesis, C++ generation and compilation,
each step cached.

The block itself is exported (:func:`gpurtl.sim.core.export.to_verilog`, the text the other
backends share, cached by the export's identity), synthesised once per text to an
and-inverter graph (:func:`.netlist.aig`, in ``sliced/aig/``), generated as bit-sliced C++
(:func:`.driver.driver_source`) and compiled with ``c++`` -- the toolchain the fast backend's
Verilator builds use -- into ``sliced/build/``, one executable per generated source, compiler,
flags and target. The lane count follows the vector registers the compiler targets with
``-march=native`` (:func:`target`): 512 lanes with AVX-512, 256 with AVX2, 128 otherwise.
"""

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from amaranth.hdl import Shape

from ...core import cache
from ...core.export import cache_dir, cxx_toolchain, to_verilog, verilator_env
from ...core.files import write_atomic
from ...core.registry import component_facts
from . import netlist
from .driver import DRIVER_VERSION, driver_files, ring_size, window_size

__all__ = ["CXX_FLAGS", "FP_CORES", "Model", "BuildError", "export", "model", "target"]

#: Flags of the compilation (``-march=native`` is added where the compiler takes it). -O1, not
#: -O2: on fp32_div's 14,353 gates -O1 compiled in 24 s against 46 s for -O2 and ran 10^6
#: transactions in the same time (0.25 s against 0.24 s, 2 shared cores); the generated code is
#: straight-line vector operations that -O2 has little more to do on.
#: ``-ffp-contract=off``: the behavioural cores round where their model does, never fused.
CXX_FLAGS = ("-O1", "-std=c++17", "-fno-strict-aliasing", "-ffp-contract=off")

#: How the FP32 cores are built: the RTL's gates, or the fast backend's behavioural stand-ins
#: (:mod:`gpurtl.sim.backends.fast.behavioural`) kept whole in the graph and computed on
#: values (``sliced_fp32.h``).
FP_CORES = ("rtl", "behavioural")


class BuildError(RuntimeError):
    """The C++ compiler failed; the message ends with its output's tail."""


class Model:
    """A compiled sliced model: the executable, the design facts the runner needs and how it
    was made (``synthesis_seconds`` is ``0.0`` when the netlist came from the cache)."""

    def __init__(self, executable, top, latency, ii, in_width, out_width, lanes, summary, times):
        self.executable, self.top, self.latency, self.ii = Path(executable), top, latency, ii
        self.in_width, self.out_width, self.lanes = in_width, out_width, lanes
        self.summary = summary  # ands, latches, levels
        self.synthesis_seconds = times["synthesis"]
        self.compile_seconds = times["compile"]
        self.build_seconds = times["build"]
        self.cached = times["cached"]


@functools.cache
def target():
    """``(flags, words)``: the target flags the compiler takes (``-march=native`` or none) and
    the 64-bit words per bit slice that fit its widest vector registers."""
    compiler = shutil.which("c++", path=verilator_env()["PATH"]) or "c++"
    for flags in (["-march=native"], []):
        done = subprocess.run(
            [compiler, *flags, "-dM", "-E", "-x", "c++", os.devnull],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            macros = done.stdout
            words = 8 if "__AVX512F__" in macros else 4 if "__AVX2__" in macros else 2
            return tuple(flags), words
    return (), 2


def _facts(block, params):
    in_layout, out_layout = block.layouts(**params)
    latency, ii = component_facts(
        lambda: block.build(**params),
        lambda dut: (getattr(dut, "latency", None), getattr(dut, "initiation_interval", 1)),
    )
    return latency, ii, Shape.cast(in_layout).width, Shape.cast(out_layout).width


def export(block, params, fp_cores="rtl"):
    """``(text, stubs)``: the exported Verilog of ``block`` with ``params`` and the black boxes
    its netlist keeps (:func:`.netlist.core_stubs` with behavioural cores, none with the RTL's)."""
    if fp_cores not in FP_CORES:
        raise ValueError(f"`fp_cores` must be one of {', '.join(FP_CORES)}, not {fp_cores!r}")
    if fp_cores == "rtl":
        return to_verilog(block, params), ""
    from ..fast import behavioural

    identity = hashlib.sha256(Path(behavioural.__file__).read_bytes()).hexdigest()
    text = to_verilog(
        block, params, platform=behavioural.PLATFORM, platform_key=f"behavioural-{identity}"
    )
    return text, netlist.core_stubs()


def model(block, params, *, log=None, words=None, graph_filter=None, fp_cores="rtl"):
    """The compiled sliced model of the pipeline ``block`` with ``params``, built when missing.

    ``words``: 64-bit words per bit slice (by default :func:`target`'s). ``graph_filter(aig)``
    returns the graph to generate instead of the synthesised one (tests corrupt a gate with it).
    ``fp_cores``: one of :data:`FP_CORES`. ``log(text)`` receives progress lines.
    """
    if block.kind != "pipeline":
        raise ValueError(f"the sliced backend builds pipeline blocks, not {block.kind!r} blocks")
    log = log or (lambda text: None)
    compiler = cxx_toolchain("the sliced backend")
    started = time.monotonic()
    flags, native_words = target()
    words = native_words if words is None else words
    text, stubs = export(block, params, fp_cores)
    graph, synthesis_seconds = netlist.aig(text, block.name, stubs=stubs, log=log)
    if graph_filter is not None:
        graph = graph_filter(graph)
    latency, ii, in_width, out_width = _facts(block, params)
    sources = driver_files(
        graph, in_width, out_width, words, ring_size(latency), window_size(latency, 64 * words)
    )
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name].encode() + b"\0")
    key = json.dumps(
        {
            "source": digest.hexdigest(),
            "driver": DRIVER_VERSION,
            "flags": [*CXX_FLAGS, *flags],
            "compiler": compiler,
            "machine": platform.machine(),
            "target": target_macros(flags),
        },
        sort_keys=True,
    )
    folder = (
        cache_dir()
        / "sliced"
        / "build"
        / (f"{block.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}")
    )
    executable = folder / f"sliced_{block.name}"
    cached = executable.exists()
    compile_seconds = 0.0
    if not cached:
        compile_seconds = _compile(folder, executable.name, sources, flags, log)
        cache.prune()
    cache.touch(folder)
    return Model(
        executable,
        block.name,
        latency,
        ii,
        in_width,
        out_width,
        words * 64,
        graph.summary(),
        {
            "synthesis": synthesis_seconds,
            "compile": compile_seconds,
            "build": time.monotonic() - started,
            "cached": cached,
        },
    )


@functools.cache
def target_macros(flags):
    """The vector-extension macros (``__AVX2__``, ``__AVX512F__`` ...) the compiler defines
    with ``flags``: part of the build key, so a cache shared between machines keeps one
    executable per instruction set."""
    compiler = shutil.which("c++", path=verilator_env()["PATH"]) or "c++"
    done = subprocess.run(
        [compiler, *flags, "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True
    )
    names = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("#define")]
    return sorted(name for name in names if name.startswith(("__AVX", "__SSE", "__ARM_NEON")))


def _compile(folder, name, sources, flags, log):
    """Compile ``sources`` (``{file name: text}``) into ``folder/name``: every file to an
    object in parallel (as many at once as there are CPUs), then one link."""
    scratch = folder.with_name(folder.name + f".{os.getpid()}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for file, text in sources.items():
        write_atomic(scratch / file, text)
    size = sum(len(text) for text in sources.values())
    log(
        f"compiling the bit-sliced model ({size // 1024} KiB of C++ in {len(sources)} "
        f"file{'s' if len(sources) > 1 else ''})"
    )
    started = time.monotonic()
    jobs = max(1, os.cpu_count() or 1)
    objects = [Path(file).with_suffix(".o").name for file in sources]
    pending = list(zip(sources, objects))
    running = []
    failed = None
    with open(scratch / "build.log", "w") as build_log:
        while (pending or running) and failed is None:
            while pending and len(running) < jobs:
                file, obj = pending.pop(0)
                command = ["c++", *CXX_FLAGS, *flags, "-c", "-o", obj, file]
                running.append(
                    subprocess.Popen(
                        command,
                        cwd=scratch,
                        env=verilator_env(),
                        stdout=build_log,
                        stderr=subprocess.STDOUT,
                    )
                )
            done = running.pop(0)
            if done.wait() != 0:
                failed = done
        for process in running:
            process.wait()
        if failed is None:
            link = ["c++", *flags, "-o", name, *objects]
            if (
                subprocess.run(
                    link,
                    cwd=scratch,
                    env=verilator_env(),
                    stdout=build_log,
                    stderr=subprocess.STDOUT,
                ).returncode
                != 0
            ):
                failed = link
    if failed is not None:
        tail = (scratch / "build.log").read_text()[-3000:]
        raise BuildError(f"the sliced build failed (log: {scratch / 'build.log'})\n{tail}")
    seconds = time.monotonic() - started
    log(f"compiled in {seconds:.0f} s")
    for file, obj in zip(sources, objects):  # kept in the key; large for a large design
        (scratch / file).unlink()
        (scratch / obj).unlink()
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(scratch, folder)
    return seconds
