"""Export time of a block with each distinct FP32 core written once and with every instance
elaborated in place, side by side in one process.

``python -m gpurtl.sim.tools.bench_export BLOCK [-p NAME=VALUE ...] [--repeat R]``

Each run builds the design afresh and exports it (:func:`gpurtl.sim.core.export.convert` with
``share=True`` and ``share=False``, then :func:`~gpurtl.sim.core.export.dedupe_modules`, as
``gpurtl export`` does without its cache); the two kinds alternate, ``R`` runs each, and the
median process (CPU) time of each is printed with the size of its text and its module count.
"""

import argparse
import re
import statistics
import time

from ..core import export, registry

__all__ = ["export_times", "main"]

_MODULE = re.compile(r"^module ", re.M)


def export_times(block, params, repeat):
    """``{share: {"cpu_seconds": [...], "median": s, "bytes": n, "modules": n}}`` for
    ``share`` ``True`` and ``False``, alternating runs."""
    result = {share: {"cpu_seconds": []} for share in (True, False)}
    for _ in range(repeat):
        for share in (True, False):
            started = time.process_time()
            text, _ = export.dedupe_modules(
                export.convert(block.build(**params), block.name, share=share)
            )
            entry = result[share]
            entry["cpu_seconds"].append(time.process_time() - started)
            entry["bytes"], entry["modules"] = len(text), len(_MODULE.findall(text))
    for entry in result.values():
        entry["median"] = statistics.median(entry["cpu_seconds"])
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m gpurtl.sim.tools.bench_export", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("block")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be a positive integer, not {args.repeat}")
    try:
        block = registry.get(args.block)
        pairs = dict(item.split("=", 1) for item in args.param if "=" in item)
        if len(pairs) != len(args.param):
            raise registry.RegistryError("a parameter must be NAME=VALUE")
        params = block.resolve(pairs)
    except registry.RegistryError as error:
        parser.error(str(error))
    result = export_times(block, params, args.repeat)
    shown = " ".join(f"{k}={v}" for k, v in params.items())
    print(f"export {block.name} [{shown}], medians of {args.repeat} alternating runs")
    for share, label in ((True, "each core once"), (False, "every instance")):
        entry = result[share]
        runs = ", ".join(f"{s:.1f}" for s in entry["cpu_seconds"])
        print(
            f"{label}: {entry['median']:.1f} CPU-s (runs {runs}), "
            f"{entry['bytes']:,} bytes, {entry['modules']} modules"
        )
    ratio = result[False]["median"] / max(result[True]["median"], 1e-9)
    print(f"every instance / each core once: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
