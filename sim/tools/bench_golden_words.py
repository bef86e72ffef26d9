"""Throughput of the ray accelerator's golden models: scalar vs batch, and the word stimulus.

``python -m gpurtl.sim.tools.bench_golden_words [--count N] [--scalar-count K] [--repeat R]``

1. :func:`~gpurtl.sim.blocks.ray_accel_words.stimulus_words` makes ``N`` rows (rows/s).
2. The batch model (``golden_words``) runs on all ``N`` rows and on the BVH8 box rows among them
   (single form, node type 5, no OBB rotation): instructions/s and box tests/s (8 per node).
3. Side by side on the same ``K`` rows of each set: the scalar model
   (:class:`~gpurtl.golden.ray_accel.scalar.intersect.IntersectModel`, one dictionary per call) and the
   batch model; the ratio. Every timing is the median of ``R`` runs; the batch results are
   compared with the scalar ones on the ``K`` rows.

Wall-clock rates depend on what else the machine runs; the rates per CPU second (process time)
do much less.
"""

import argparse
import statistics
import time

import numpy as np

from gpurtl.facts.ray_accel import INSTR_LAYOUT, OUT_LAYOUT
from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel
from gpurtl.golden.ray_accel.vector.bitfields import field_span, read_field

from ..core import registry
from ..core.words import dicts_from_words, words_from_dicts

__all__ = ["main"]


def _median_time(function, repeat):
    """Median wall-clock and process (CPU) seconds of ``repeat`` calls, and the last result."""
    wall, cpu = [], []
    result = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = function()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return (statistics.median(wall), statistics.median(cpu)), result


def _rate(count, times, unit):
    return f"{count / times[0]:,.0f} {unit} ({count / times[1]:,.0f} per CPU second)"


def _compare(name, words, block, params, scalar_count, repeat, box_tests=False):
    n = min(scalar_count, words.shape[0])
    part = words[:n]
    txs = dicts_from_words(INSTR_LAYOUT, part)
    model = IntersectModel(ftz=params["ftz"])
    t_scalar, outs = _median_time(lambda: [model(tx) for tx in txs], repeat)
    t_batch, got = _median_time(lambda: block.golden_words(part, **params), repeat)
    same = np.array_equal(words_from_dicts(OUT_LAYOUT, outs), got)
    print(
        f"{name}, same {n} rows: scalar {_rate(n, t_scalar, 'instr/s')}, batch "
        f"{_rate(n, t_batch, 'instr/s')}, ratio {t_scalar[0] / t_batch[0]:,.1f}x wall, "
        f"{t_scalar[1] / t_batch[1]:,.1f}x CPU, {'bit-identical' if same else 'MISMATCH'}"
    )
    if box_tests:
        print(
            f"    box tests: scalar {_rate(8 * n, t_scalar, 'box tests/s')}, batch "
            f"{_rate(8 * n, t_batch, 'box tests/s')}"
        )
    return same


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m gpurtl.sim.tools.bench_golden_words", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--scalar-count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.count < 1 or args.scalar_count < 1 or args.repeat < 1:
        parser.error("--count, --scalar-count and --repeat must be positive")
    block = registry.get("ray_accel")
    params = block.resolve()

    t, words = _median_time(
        lambda: block.stimulus_words(np.random.default_rng(args.seed), args.count, **params), 1
    )
    print(f"stimulus_words: {args.count:,} rows in {t[0]:.2f} s, {_rate(args.count, t, 'rows/s')}")

    def field(*path):
        return read_field(words, *field_span(INSTR_LAYOUT, *path))

    box = (
        (field("dual") == 0)
        & ((field("node_ptr", 0) & 0xF) == 5)
        & ((field("node", 0, 7) & 0x7F) == 0x7F)
    )
    box_words = np.ascontiguousarray(words[box])
    t, _ = _median_time(lambda: block.golden_words(words, **params), args.repeat)
    print(
        f"batch, mixed stimulus: {args.count:,} rows, median {t[0]:.2f} s, "
        f"{_rate(args.count, t, 'instr/s')}"
    )
    t, _ = _median_time(lambda: block.golden_words(box_words, **params), args.repeat)
    rows = box_words.shape[0]
    print(
        f"batch, BVH8 box rows: {rows:,} rows, median {t[0]:.2f} s, "
        f"{_rate(rows, t, 'instr/s')}, {_rate(8 * rows, t, 'box tests/s')}"
    )
    ok = _compare("mixed stimulus", words, block, params, args.scalar_count, args.repeat)
    ok &= _compare(
        "BVH8 box rows", box_words, block, params, args.scalar_count, args.repeat, box_tests=True
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
