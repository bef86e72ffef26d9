"""``gpurtl bench``: simulation speed of every backend, side by side, on the same stimulus.

Each backend runs the first transactions of one stimulus under the same stall policy as
``gpurtl check`` (the first tenth stall-free, then 70% valid / 70% ready), and every run is
compared with the golden model. Build (elaboration, export, compilation) and golden-model times
are reported apart from the simulation time; the fast backend runs its transactions in as many
processes as ``gpurtl check`` would (one per core when the batch is large).
"""

import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from .core.export import cache_dir
from .harness.engine import StallPattern, drive_pipeline

__all__ = ["BACKENDS", "bench", "format_table", "default_slow_count"]

BACKENDS = ("pysim", "verilator", "fast-stalled", "fast-batch")

#: Box tests per instruction that ``ray_accel``'s figures count: one BVH8 node, eight children.
BOX_TESTS_PER_INSTRUCTION = 8

P_VALID = P_READY = 0.7


def default_slow_count(in_width):
    """Transactions for pysim and cocotb: fewer for wide (large) designs, which run at a few
    cycles per second there."""
    return 2000 if in_width <= 256 else 40


def _cpu_seconds():
    """CPU time of this process and its finished children (the drivers, cocotb, compilers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _stalls(seed, count):
    return StallPattern(seed=seed, p_valid=P_VALID, p_ready=P_READY, free_run=max(1, count // 10))


def _compare_python(block, params, count, inputs, expected, backend, seed):
    """pysim or cocotb on the first ``count`` rows; build time measured apart from the run."""
    from .harness import lockstep

    in_layout, out_layout = block.layouts(**params)
    input_bits = [int.from_bytes(row.tobytes(), "little") for row in inputs[:count]]
    expected_bits = [int.from_bytes(row.tobytes(), "little") for row in expected[:count]]
    started = time.monotonic()
    if backend == "pysim":
        from amaranth.sim import Simulator

        from .backends.pysim import AmaranthIO, port_map

        dut = block.build(**params)
        latency = dut.latency
        sim = Simulator(dut)
        sim.add_clock(1e-8)
        ports = port_map(dut)
        build_seconds = time.monotonic() - started
        report, on_output = lockstep.compare_events(block, params, expected_bits, latency=latency)
        stalls = _stalls(seed, count)
        report.free_run = stalls.free_run
        result = {}

        async def testbench(ctx):
            result["cycles"] = await drive_pipeline(
                AmaranthIO(ctx, ports), input_bits, stalls, on_output
            )

        sim.add_testbench(testbench)
        started, cpu = time.monotonic(), _cpu_seconds()
        sim.run()
        report.cycles = result["cycles"]
        report.failed += report.latency_errors
    else:
        from .backends.verilator import build, run_cocotb

        build(block, params)
        build_seconds = time.monotonic() - started
        started, cpu = time.monotonic(), _cpu_seconds()
        report = run_cocotb(block, params, input_bits, expected_bits, _stalls(seed, count))
    return report, build_seconds, time.monotonic() - started, _cpu_seconds() - cpu


def bench(block, params, *, count=100_000, slow_count=None, seed=0, backends=None, log=None):
    """Run the backends and return ``{"block", "params", "golden_seconds", "rows": [...]}``.

    A row: ``backend``, ``transactions``, ``cycles``, ``build_seconds``, ``sim_seconds``,
    ``cycles_per_s``, ``instructions_per_s`` (transactions per wall-clock second),
    ``sim_cpu_seconds`` and ``instructions_per_cpu_s`` (CPU time of the simulating processes,
    all of them: a figure that a busy machine does not distort), ``passed``, ``failed`` and, for
    ``ray_accel``, ``box_tests_per_s``.
    """
    from .backends.fast.build import model as build_model
    from .backends.fast.run import FastReport, _compare, check_disk, run_rows
    from .backends.fast.words import batches
    from .core.registry import RegistryError

    if block.kind != "pipeline":
        raise RegistryError(
            f"`gpurtl bench` measures pipeline blocks; `{block.name}` is cycle-stepped"
        )
    backends = list(backends or BACKENDS)
    for name in backends:
        if name not in BACKENDS:
            raise RegistryError(f"backend must be one of {', '.join(BACKENDS)}, not {name!r}")
    log = log or (lambda text: None)
    in_layout, out_layout = block.layouts(**params)
    from amaranth.hdl import Shape

    slow = slow_count or default_slow_count(Shape.cast(in_layout).width)
    total = max(
        count if any(b.startswith("fast") for b in backends) else 0,
        slow if {"pysim", "verilator"} & set(backends) else 0,
    )
    check_disk(total, Shape.cast(in_layout).width, Shape.cast(out_layout).width)
    result = {"block": block.name, "params": params, "rows": []}
    folder = cache_dir() / "fast" / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        in_path, expected_path = Path(work) / "in.bin", Path(work) / "expected.bin"
        log(f"stimulus and golden outputs: {total} transactions")
        started = time.monotonic()
        with open(in_path, "wb") as inputs, open(expected_path, "wb") as expected:
            for rows, golden in batches(block, params, np.random.default_rng(seed), total):
                np.ascontiguousarray(rows, dtype="<u4").tofile(inputs)
                np.ascontiguousarray(golden, dtype="<u4").tofile(expected)
        result["golden_seconds"] = round(time.monotonic() - started, 3)
        result["golden_transactions"] = total
        in_rows = np.memmap(in_path, dtype="<u4", mode="r", shape=(total, _words(in_layout)))
        golden_rows = np.memmap(
            expected_path, dtype="<u4", mode="r", shape=(total, _words(out_layout))
        )
        for name in backends:
            log(f"{name} ...")
            if name in ("pysim", "verilator"):
                n = min(slow, total)
                report, build_seconds, sim_seconds, cpu_seconds = _compare_python(
                    block, params, n, in_rows, golden_rows, name, seed
                )
            else:
                n = min(count, total)
                top = name.split("-", 1)[1]
                model = build_model(block, params, top=top, log=log)
                build_seconds = model.build_seconds
                report = FastReport()
                started, cpu = time.monotonic(), _cpu_seconds()
                slices = run_rows(
                    model,
                    in_path,
                    n,
                    seed=seed,
                    p_valid=P_VALID,
                    p_ready=P_READY,
                    free_run=max(1, n // 10),
                    work=work,
                )
                sim_seconds, cpu_seconds = time.monotonic() - started, _cpu_seconds() - cpu
                _compare(report, model, out_layout, slices, golden_rows, keep_outputs=False)
            row = {
                "backend": name,
                "transactions": n,
                "cycles": report.cycles,
                "build_seconds": round(build_seconds, 2),
                "sim_seconds": round(sim_seconds, 3),
                "cycles_per_s": round(report.cycles / max(sim_seconds, 1e-9)),
                "instructions_per_s": round(n / max(sim_seconds, 1e-9), 1),
                "sim_cpu_seconds": round(cpu_seconds, 3),
                "instructions_per_cpu_s": round(n / max(cpu_seconds, 1e-9), 1),
                "passed": report.passed,
                "failed": report.failed,
                "first_mismatch": str(report.first) if report.first else None,
            }
            if block.name == "ray_accel":
                row["box_tests_per_s"] = round(
                    BOX_TESTS_PER_INSTRUCTION * n / max(sim_seconds, 1e-9)
                )
            result["rows"].append(row)
            log(f"{name}: {row['instructions_per_s']} instructions/s, {report.line()}")
        del in_rows, golden_rows
    return result


def _words(layout):
    from amaranth.hdl import Shape

    from .backends.fast.driver import words_of

    return words_of(Shape.cast(layout).width)


def format_table(result):
    """The bench result as a plain-text table, the fastest backend's speed-ups last."""
    shown = " ".join(f"{k}={v}" for k, v in result["params"].items())
    lines = [
        f"bench {result['block']} [{shown}]",
        f"golden model + stimulus: {result['golden_transactions']} transactions in "
        f"{result['golden_seconds']:.2f} s "
        f"({result['golden_transactions'] / max(result['golden_seconds'], 1e-9):.0f}/s)",
        "",
    ]
    box = result["block"] == "ray_accel"
    header = (
        ["backend", "transactions", "cycles", "build s", "sim s", "cycles/s", "instructions/s"]
        + (["box tests/s"] if box else [])
        + ["sim CPU s", "instr/CPU-s", "vs cocotb", "result"]
    )
    cocotb = next(
        (r["instructions_per_s"] for r in result["rows"] if r["backend"] == "verilator"), None
    )
    lines.append(
        "instructions/s and vs cocotb: wall clock; instr/CPU-s: per CPU second of the "
        "simulating processes"
    )
    rows = []
    for r in result["rows"]:
        ratio = f"{r['instructions_per_s'] / cocotb:.1f}x" if cocotb else "-"
        rows.append(
            [
                r["backend"],
                str(r["transactions"]),
                str(r["cycles"]),
                f"{r['build_seconds']:.1f}",
                f"{r['sim_seconds']:.2f}",
                f"{r['cycles_per_s']}",
                f"{r['instructions_per_s']:.0f}",
            ]
            + ([f"{r['box_tests_per_s']}"] if box else [])
            + [
                f"{r['sim_cpu_seconds']:.2f}",
                f"{r['instructions_per_cpu_s']:.0f}",
                ratio,
                f"{r['passed']} passed, {r['failed']} failed",
            ]
        )
    widths = [
        max(len(h), *(len(row[k]) for row in rows)) if rows else len(h)
        for k, h in enumerate(header)
    ]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    if box:
        lines.append(
            f"box tests/s counts {BOX_TESTS_PER_INSTRUCTION} per instruction (a BVH8 "
            f"node); the stimulus also holds triangle, instance and legacy nodes"
        )
    return "\n".join(lines)
