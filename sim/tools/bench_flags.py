"""Build and replay time of a cycle-stepped block's compiled model under several build flags,
each build from an empty cache.

``python -m gpurtl.sim.tools.bench_flags BLOCK [-p NAME=VALUE ...] [--cycles N] [--repeat R]
[--variants NAME,...]``

Each variant (:data:`VARIANTS`) changes the fast backend's build flags: the optimisation levels
of Verilator's makefile (``OPT_FAST`` / ``OPT_SLOW`` / ``OPT_GLOBAL``), ``--output-split`` and the
parallel ``make -j`` (``--build-jobs``), and ccache where it is installed (``OBJCACHE``; the
variant is reported as not installed otherwise), and cocotb's VPI flags (``public``). The model
is built in a fresh temporary cache (the CPU time of the compiler and make, the export apart,
and the wall time of the build), then the same ``N`` cycles of the block's stimulus are replayed
``R`` times; the median replay CPU time is printed with the load of the machine.
"""

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ..backends.fast import build, cycle
from ..core import registry
from ..core.words import words_from_ints
from ..harness.golden_io import random_stream

__all__ = ["LEVELS", "VARIANTS", "main"]

#: ``(OPT_FAST, OPT_SLOW, OPT_GLOBAL)`` measured.
LEVELS = (
    ("-O0", "-O0", "-O0"),
    ("-O1", "-O0", "-O1"),
    ("-O2", "-O0", "-O1"),
    ("-O3", "-O0", "-O1"),
)

_SPLIT = ("--output-split", "20000", "--output-split-cfuncs", "2000")

#: What cocotb's Verilator runner adds to a model for its VPI access (``cocotb_tools.runner``).
COCOTB_FLAGS = ("--vpi", "--public-flat-rw")

#: name -> (levels, keep --output-split, build jobs, ccache, extra Verilator flags); ``kept`` is
#: the backend's own; ``public`` the fast build with cocotb's VPI flags (what one model shared
#: by the ``verilator`` and ``fast`` backends would need).
VARIANTS = {
    "O0": (LEVELS[0], True, 2, False, ()),
    "O1": (LEVELS[1], True, 2, False, ()),
    "kept": (LEVELS[2], True, 2, False, ()),
    "O3": (LEVELS[3], True, 2, False, ()),
    "no-split": (LEVELS[2], False, 2, False, ()),
    "j1": (LEVELS[2], True, 1, False, ()),
    "ccache": (LEVELS[2], True, 2, True, ()),
    "public": (LEVELS[2], True, 2, False, COCOTB_FLAGS),
}


def _children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _flags(base, split, jobs, extra):
    """The Verilator flags ``base`` (the backend's own) with ``--output-split`` kept or dropped,
    ``jobs`` and the ``extra`` flags."""
    flags = list(base) + list(extra)
    if not split:
        for flag in _SPLIT:
            flags.remove(flag)
    flags[flags.index("--build-jobs") + 1] = str(jobs)
    return tuple(flags)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpurtl.sim.tools.bench_flags")
    parser.add_argument("block")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--cycles", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="names, comma-separated")
    args = parser.parse_args(argv)
    names = args.variants.split(",")
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}")
    block = registry.get(args.block)
    params = block.resolve(dict(pair.split("=", 1) for pair in args.param))
    in_layout, _ = block.layouts(**params)
    saved = build.MAKE_FLAGS, build.VERILATOR_FLAGS, os.environ.get("GPURTL_CACHE")
    with tempfile.TemporaryDirectory() as work:
        in_path, out_path = Path(work) / "in.bin", Path(work) / "out.bin"
        stream, _ = random_stream(block, params, args.cycles, 0)
        words_from_ints(in_layout, list(stream)).tofile(in_path)
        try:
            for name in names:
                (fast, slow, glob), split, jobs, ccache, extra = VARIANTS[name]
                if ccache and shutil.which("ccache") is None:
                    print(f"{block.name} {name}: ccache is not installed", flush=True)
                    continue
                os.environ["GPURTL_CACHE"] = tempfile.mkdtemp(dir=work)
                build.MAKE_FLAGS = (
                    f"OPT_FAST={fast}",
                    f"OPT_SLOW={slow}",
                    f"OPT_GLOBAL={glob}",
                    *saved[0][3:],
                    *(("OBJCACHE=ccache",) if ccache else ()),
                )
                build.VERILATOR_FLAGS = _flags(saved[1], split, jobs, extra)
                started, wall = _children(), time.monotonic()
                model = cycle.model_of(block, params)
                compiled, wall = _children() - started, time.monotonic() - wall
                runs = []
                for _ in range(args.repeat):
                    started = _children()
                    cycle.replay(model, in_path, out_path, args.cycles)
                    runs.append(_children() - started)
                replay = statistics.median(runs)
                print(
                    f"{block.name} {name} (OPT_FAST={fast} OPT_SLOW={slow} OPT_GLOBAL={glob}, "
                    f"{'--output-split' if split else 'no split'}, -j {jobs}"
                    f"{', ccache' if ccache else ''}{''.join(' ' + f for f in extra)}): "
                    f"build {compiled:.1f} CPU-s (compiler), "
                    f"{wall:.0f} s wall (export included); replay of {args.cycles} cycles "
                    f"{replay:.3f} CPU-s ({args.cycles / replay:.0f} cycles per CPU-s), load "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        finally:
            build.MAKE_FLAGS, build.VERILATOR_FLAGS = saved[0], saved[1]
            if saved[2] is None:
                os.environ.pop("GPURTL_CACHE", None)
            else:
                os.environ["GPURTL_CACHE"] = saved[2]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
