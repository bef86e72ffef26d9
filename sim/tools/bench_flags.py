"""Build and replay time of a cycle-stepped block's compiled model at several optimisation levels
of its C++, each build from an empty cache.

``python -m gpurtl.sim.tools.bench_flags BLOCK [-p NAME=VALUE ...] [--cycles N] [--repeat R]``

For each level (``OPT_FAST`` / ``OPT_SLOW`` / ``OPT_GLOBAL`` of Verilator's makefile) the model
is built in a fresh temporary cache (the compiler's CPU time is measured, the export apart), then
the same ``N`` cycles of the block's stimulus are replayed ``R`` times; the median replay CPU
time is printed with the load of the machine.
"""

import argparse
import os
import resource
import statistics
import tempfile
from pathlib import Path

from ..backends.fast import build, cycle
from ..core import registry
from ..core.words import words_from_ints
from ..harness.golden_io import random_stream

__all__ = ["LEVELS", "main"]

#: ``(OPT_FAST, OPT_SLOW, OPT_GLOBAL)`` measured.
LEVELS = (
    ("-O0", "-O0", "-O0"),
    ("-O1", "-O0", "-O1"),
    ("-O2", "-O0", "-O1"),
    ("-O3", "-O0", "-O1"),
)


def _children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpurtl.sim.tools.bench_flags")
    parser.add_argument("block")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--cycles", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    block = registry.get(args.block)
    params = block.resolve(dict(pair.split("=", 1) for pair in args.param))
    in_layout, _ = block.layouts(**params)
    saved_flags, saved_cache = build.MAKE_FLAGS, os.environ.get("GPURTL_CACHE")
    with tempfile.TemporaryDirectory() as work:
        in_path, out_path = Path(work) / "in.bin", Path(work) / "out.bin"
        stream, _ = random_stream(block, params, args.cycles, 0)
        words_from_ints(in_layout, list(stream)).tofile(in_path)
        try:
            for fast, slow, glob in LEVELS:
                os.environ["GPURTL_CACHE"] = tempfile.mkdtemp(dir=work)
                build.MAKE_FLAGS = (
                    f"OPT_FAST={fast}",
                    f"OPT_SLOW={slow}",
                    f"OPT_GLOBAL={glob}",
                    *saved_flags[3:],
                )
                started = _children()
                model = cycle.model_of(block, params)
                compiled = _children() - started
                runs = []
                for _ in range(args.repeat):
                    started = _children()
                    cycle.replay(model, in_path, out_path, args.cycles)
                    runs.append(_children() - started)
                replay = statistics.median(runs)
                print(
                    f"{block.name} OPT_FAST={fast} OPT_SLOW={slow} OPT_GLOBAL={glob}: build "
                    f"{compiled:.1f} CPU-s (compiler), replay of {args.cycles} cycles "
                    f"{replay:.3f} CPU-s ({args.cycles / replay:.0f} cycles per CPU-s), load "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        finally:
            build.MAKE_FLAGS = saved_flags
            if saved_cache is None:
                os.environ.pop("GPURTL_CACHE", None)
            else:
                os.environ["GPURTL_CACHE"] = saved_cache
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
