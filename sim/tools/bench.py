"""``gpurtl bench``: simulation speed of every backend, side by side, on the same stimulus, and
what a co-simulation session costs against a batch run.

Each backend (each model of it: ``fast-stalled``, ``fast-batch``) runs the first transactions of
one stimulus under the same stall policy as ``gpurtl check`` (the first tenth stall-free, then
70% valid / 70% ready), and every run is compared with the golden model. Build (elaboration,
export, compilation) and golden-model times are reported apart from the simulation time; the
fast backend runs its transactions in as many processes as ``gpurtl check`` would (one per core
when the batch is large).

For ``ray_accel`` the compiled rows run twice: on the build asked for and on the box-only build a
box-throughput study would use (the same parameters with ``triangles=0 transforms=0``, see
:func:`box_only_params`), each with its box tests per second and per CPU second.

With ``--session`` a session on one backend (by default the fast backend's batch top) runs the
same transactions, sent in batches of 1, 32 and 1024, under the same stall policy and without
golden checking, and the table compares its throughput with the batch run of the same model:

``closed``
    each batch waits for its own outputs before the next is sent, as a loop whose next inputs
    depend on the outputs does (the pipeline drains between batches);
``streamed``
    the next batch is sent before the outputs of the previous one are read (the pipeline stays
    full; only the session's transport costs).
"""

import statistics
import time
from pathlib import Path

import numpy as np

from ..backends import BACKENDS
from ..core.registry import RegistryError
from ..core.words import width_of, words_of
from ..harness.backend import cpu_seconds as harness_cpu_seconds
from ..harness.engine import StallPattern
from ..harness.lockstep import free_run_of

__all__ = [
    "BENCH_ROWS",
    "box_only_params",
    "SESSION_BATCHES",
    "bench",
    "bench_sessions",
    "format_table",
    "format_session_table",
    "default_slow_count",
    "default_rows",
]

#: The rows ``gpurtl bench`` can measure: every variant of every backend, by name.
BENCH_ROWS = {
    backend.variant_name(variant): (backend, variant)
    for backend in BACKENDS.values()
    for variant in backend.variants
}

#: Transactions per batch sent to a session by ``gpurtl bench --session``.
SESSION_BATCHES = (1, 32, 1024)

#: Box tests per instruction that ``ray_accel``'s figures count: one BVH8 node, eight children.
BOX_TESTS_PER_INSTRUCTION = 8

P_VALID = P_READY = 0.7


def default_slow_count(in_width):
    """Transactions for the backends that run Python per cycle: fewer for wide (large) designs,
    which run at a few cycles per second there."""
    return 2000 if in_width <= 256 else 40


def _stalls(seed, count):
    return StallPattern(seed=seed, p_valid=P_VALID, p_ready=P_READY, free_run=free_run_of(count))


def default_rows():
    """The rows ``gpurtl bench`` measures when no backends are named."""
    return [name for name, (backend, _) in BENCH_ROWS.items() if backend.benched]


def _chosen(backends):
    names = list(backends or default_rows())
    for name in names:
        if name not in BENCH_ROWS:
            raise RegistryError(f"backend must be one of {', '.join(BENCH_ROWS)}, not {name!r}")
    return names


def box_only_params(block, params):
    """The box-only build of ``ray_accel`` beside ``params`` (no triangle paths, no ray
    transforms), or ``None`` when ``block`` is another block or ``params`` is box-only already."""
    if block.name != "ray_accel" or not (params["triangles"] or params["transforms"]):
        return None
    return {**params, "triangles": False, "transforms": False}


def _compiled(name):
    """Whether a row runs no Python per cycle."""
    backend, _ = BENCH_ROWS[name]
    return not backend.python_per_cycle


class _Stimulus:
    """The stimulus and golden outputs of a bench, written once as word rows to two files."""

    def __init__(self, block, params, total, seed, work, log):
        from ..backends.fast.run import write_stimulus

        in_layout, out_layout = block.layouts(**params)
        in_path, expected_path = Path(work) / "in.bin", Path(work) / "expected.bin"
        log(f"stimulus and golden outputs: {total} transactions")
        self.seconds = write_stimulus(block, params, seed, total, in_path, expected_path)
        self.total = total
        self.inputs = np.memmap(
            in_path, dtype="<u4", mode="r", shape=(total, words_of(width_of(in_layout)))
        )
        self.expected = np.memmap(
            expected_path, dtype="<u4", mode="r", shape=(total, words_of(width_of(out_layout)))
        )


def _cycle_rows(block, names, *, explicit):
    """The rows of ``names`` that run a cycle-stepped ``block``: each backend once, the fast
    backends as the block itself (``-stalled``: a cycle block has no batch top)."""
    kept = []
    for name in names:
        backend, variant = BENCH_ROWS[name]
        if "cycle" not in backend.kinds:
            if explicit:
                raise RegistryError(f"the {name} backend runs pipelines only, not `{block.name}`")
        elif variant in (None, "stalled"):
            kept.append(name)
        elif explicit:
            raise RegistryError(
                f"`{block.name}` is cycle-stepped: it runs as the block itself "
                f"({backend.variant_name('stalled')}), not {name}"
            )
    return kept


def _check_block(block, total, params):
    from ..backends.fast.run import check_disk

    in_layout, out_layout = block.layouts(**params)
    check_disk(total, width_of(in_layout), width_of(out_layout))


def _median_rows(names, run, repeat):
    """Rows of ``names``: each compiled row run ``repeat`` times, alternating between the rows
    (so a change of machine load reaches them alike), the run of median simulation CPU time
    kept; a run with a mismatch is kept instead. Python-per-cycle rows run once."""
    runs = {name: [] for name in names}
    for index in range(repeat):
        for name in names:
            if index == 0 or _compiled(name):
                runs[name].append(run(name))
    rows = []
    for name in names:
        ordered = sorted(runs[name], key=lambda row: row["sim_cpu_seconds"])
        failing = [row for row in ordered if row["failed"]]
        row = failing[0] if failing else ordered[(len(ordered) - 1) // 2]
        # the first run builds (or finds) the model: its build time is the row's
        first = runs[name][0]
        rows.append(
            {
                **row,
                "build_seconds": first["build_seconds"],
                "build_cpu_seconds": first.get("build_cpu_seconds", 0.0),
                "runs": len(ordered),
            }
        )
    return rows


def bench(
    block, params, *, count=100_000, slow_count=None, seed=0, backends=None, log=None, repeat=1
):
    """Run the backends and return ``{"block", "params", "golden_seconds", "rows": [...]}``.

    A row: ``backend``, ``transactions``, ``cycles``, ``build_seconds``, ``build_cpu_seconds``
    (the CPU time of the row besides its simulation: the export, Verilator and the compiler where
    the row built its model, else finding it and the comparison), ``sim_seconds``,
    ``cycles_per_s``, ``instructions_per_s`` (transactions per wall-clock second),
    ``sim_cpu_seconds`` and ``instructions_per_cpu_s`` (CPU time of the simulating processes,
    all of them: a figure that a busy machine does not distort), ``passed``, ``failed`` and, for
    ``ray_accel``, ``build`` (``asked`` or ``box-only``), ``box_tests_per_s`` and
    ``box_tests_per_cpu_s``; the box-only rows follow (compiled backends only, see
    :func:`box_only_params`). With ``repeat`` above one, each compiled row is the run of
    median CPU time of ``repeat`` runs on the same stimulus (``runs`` says how many).
    """
    from ..backends.fast.run import work_dir

    names = _chosen(backends)
    if block.kind == "cycle":
        names = _cycle_rows(block, names, explicit=bool(backends))
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise RegistryError(f"`repeat` must be a positive integer, not {repeat!r}")
    log = log or (lambda text: None)
    in_layout, _ = block.layouts(**params)
    slow = slow_count or default_slow_count(width_of(in_layout))
    total = max(
        count if any(_compiled(n) for n in names) else 0,
        slow if any(not _compiled(n) for n in names) else 0,
    )
    _check_block(block, total, params)
    result = {"block": block.name, "params": params, "rows": []}
    box_only = box_only_params(block, params)
    box_names = [name for name in names if _compiled(name)] if box_only else []
    if box_names:
        result["box_only_params"] = box_only
    with work_dir() as work:
        stimulus = _Stimulus(block, params, total, seed, work, log)
        result["golden_seconds"] = round(stimulus.seconds, 3)
        result["golden_transactions"] = total

        def asked(name):
            n = min(count if _compiled(name) else slow, total)
            return _bench_row(name, block, params, stimulus, n, seed, work, log)

        result["rows"] += _median_rows(names, asked, repeat)
        del stimulus
        if box_names:
            box_work = Path(work) / "box-only"
            box_work.mkdir()
            stimulus = _Stimulus(block, box_only, count, seed, box_work, log)

            def box(name):
                return _bench_row(name, block, box_only, stimulus, count, seed, box_work, log)

            for row in _median_rows(box_names, box, repeat):
                result["rows"].append({**row, "build": "box-only"})
            del stimulus
    return result


def _bench_row(name, block, params, stimulus, n, seed, work, log):
    """One row of :func:`bench`: backend row ``name`` on the first ``n`` transactions."""
    backend, variant = BENCH_ROWS[name]
    log(f"{name} ...")
    total = harness_cpu_seconds()
    report, build_seconds, sim_seconds, cpu_seconds = backend.timed_run(
        block,
        params,
        stimulus.inputs[:n],
        stimulus.expected[:n],
        _stalls(seed, n),
        variant=variant,
        work=work,
    )
    # what the row cost besides its simulation: the build (export, Verilator, compiler) where
    # it built the model, else finding it and the comparison
    build_cpu = max(0.0, harness_cpu_seconds() - total - cpu_seconds)
    row = {
        "backend": name,
        "transactions": n,
        "cycles": report.cycles,
        "build_seconds": round(build_seconds, 2),
        "build_cpu_seconds": round(build_cpu, 2),
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
        row["build"] = "asked"
        row["box_tests_per_s"] = round(BOX_TESTS_PER_INSTRUCTION * n / max(sim_seconds, 1e-9))
        row["box_tests_per_cpu_s"] = round(BOX_TESTS_PER_INSTRUCTION * n / max(cpu_seconds, 1e-9))
    log(f"{name}: {row['instructions_per_s']} instructions/s, {report.line()}")
    return row


def _session_run(backend, variant, block, params, rows, batch, stalls, streamed):
    """Wall-clock seconds of one session through ``rows`` in batches of ``batch``; returns
    ``(seconds, cycles, outputs)``."""
    options = {"top": variant} if variant is not None else {}
    with backend.session(block, params, golden=False, stalls=stalls, **options) as session:
        started = time.monotonic()
        received = 0
        for first in range(0, len(rows), batch):
            session.send_words(rows[first : first + batch])
            ahead = batch if streamed else 0  # leave the batch just sent in flight
            take = session.in_flight - min(ahead, session.in_flight)
            if take:
                received += len(session.receive_words(take))
        received += len(session.receive_words())
        seconds = time.monotonic() - started
        return seconds, session.cycle, received


def bench_sessions(
    block,
    params,
    *,
    count=20_000,
    seed=0,
    backend="fast-batch",
    batches=SESSION_BATCHES,
    repeat=3,
    log=None,
):
    """A session of the backend row ``backend`` against its batch run on the same ``count``
    transactions, for each batch size in ``batches``; returns ``{"block", "params", "backend",
    "batch": {...}, "rows": [...]}``. A row: ``batch`` (transactions per batch), ``mode``
    (``closed`` or ``streamed``, see the module doc string), ``transactions``, ``cycles``,
    ``sim_seconds``, ``instructions_per_s`` and ``vs_batch`` (its throughput over the batch
    run's). Every time is the median of ``repeat`` runs."""
    from ..backends.fast.run import work_dir

    (name,) = _chosen([backend])
    log = log or (lambda text: None)
    _check_block(block, count, params)
    chosen, variant = BENCH_ROWS[name]
    result = {"block": block.name, "params": params, "backend": name, "repeat": repeat, "rows": []}
    with work_dir() as work:
        stimulus = _Stimulus(block, params, count, seed, work, log)
        log(f"{name}: batch run of {count} transactions")
        runs = [
            chosen.timed_run(
                block,
                params,
                stimulus.inputs,
                stimulus.expected,
                _stalls(seed, count),
                variant=variant,
                work=work,
            )
            for _ in range(repeat)
        ]
        report = runs[0][0]
        sim_seconds = statistics.median(run[2] for run in runs)
        batch_rate = count / max(sim_seconds, 1e-9)
        result["batch"] = {
            "transactions": count,
            "cycles": report.cycles,
            "sim_seconds": round(sim_seconds, 3),
            "instructions_per_s": round(batch_rate, 1),
            "failed": report.failed,
        }
        rows = np.ascontiguousarray(stimulus.inputs)
        for size in batches:
            for mode in ("closed", "streamed"):
                log(f"{name}: session, batches of {size}, {mode}")
                runs = [
                    _session_run(
                        chosen,
                        variant,
                        block,
                        params,
                        rows,
                        size,
                        _stalls(seed, count),
                        mode == "streamed",
                    )
                    for _ in range(repeat)
                ]
                seconds = statistics.median(run[0] for run in runs)
                _, cycles, received = runs[0]
                rate = received / max(seconds, 1e-9)
                result["rows"].append(
                    {
                        "batch": size,
                        "mode": mode,
                        "transactions": received,
                        "cycles": cycles,
                        "sim_seconds": round(seconds, 3),
                        "instructions_per_s": round(rate, 1),
                        "vs_batch": round(rate / batch_rate, 3),
                    }
                )
        del stimulus
    return result


def _table(header, rows):
    widths = [
        max(len(h), *(len(row[k]) for row in rows)) if rows else len(h)
        for k, h in enumerate(header)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return lines


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
        ["backend"]
        + (["build"] if box else [])
        + ["transactions", "cycles", "build s", "build CPU s", "sim s", "cycles/s"]
        + ["instructions/s"]
        + (["box tests/s"] if box else [])
        + ["sim CPU s", "instr/CPU-s"]
        + (["box tests/CPU-s"] if box else [])
        + ["vs cocotb", "result"]
    )
    cocotb = next(
        (r["instructions_per_s"] for r in result["rows"] if r["backend"] == "verilator"), None
    )
    lines.append(
        "instructions/s and vs cocotb: wall clock; instr/CPU-s: per CPU second of the "
        "simulating processes"
    )
    runs = max((r.get("runs", 1) for r in result["rows"]), default=1)
    if runs > 1:
        lines.append(
            f"compiled rows: the run of median sim CPU s of {runs}, taken in turn on the same "
            "stimulus"
        )
    rows = []
    for r in result["rows"]:
        ratio = f"{r['instructions_per_s'] / cocotb:.1f}x" if cocotb else "-"
        rows.append(
            [r["backend"]]
            + ([r["build"]] if box else [])
            + [
                str(r["transactions"]),
                str(r["cycles"]),
                f"{r['build_seconds']:.1f}",
                f"{r.get('build_cpu_seconds', 0.0):.1f}",
                f"{r['sim_seconds']:.2f}",
                f"{r['cycles_per_s']}",
                f"{r['instructions_per_s']:.0f}",
            ]
            + ([f"{r['box_tests_per_s']}"] if box else [])
            + [
                f"{r['sim_cpu_seconds']:.2f}",
                f"{r['instructions_per_cpu_s']:.0f}",
            ]
            + ([f"{r['box_tests_per_cpu_s']}"] if box else [])
            + [
                ratio,
                f"{r['passed']} passed, {r['failed']} failed",
            ]
        )
    lines += _table(header, rows)
    if box:
        lines.append(
            f"box tests/s counts {BOX_TESTS_PER_INSTRUCTION} per instruction (a BVH8 "
            f"node); the stimulus also holds triangle, instance and legacy nodes"
        )
        if "box_only_params" in result:
            shown = " ".join(f"{k}={v}" for k, v in result["box_only_params"].items())
            lines.append(
                f"build asked: the parameters above; box-only: the build a box-throughput study "
                f"uses [{shown}] (the nodes it has no path for are answered as the golden model "
                f"answers them)"
            )
    return "\n".join(lines)


def format_session_table(result):
    """The session bench as a plain-text table."""
    batch = result["batch"]
    lines = [
        f"session vs batch run on {result['backend']}: {batch['transactions']} transactions, "
        f"70% valid / 70% ready stalls, no golden checking in the session, medians of "
        f"{result['repeat']} runs",
        f"batch run: {batch['sim_seconds']:.2f} s, {batch['instructions_per_s']:.0f} "
        f"instructions/s ({batch['cycles']} cycles)",
        "closed: each batch waits for its outputs; streamed: the next batch is sent first",
        "",
    ]
    header = ["batch", "mode", "transactions", "cycles", "s", "instructions/s", "vs batch run"]
    rows = [
        [
            str(r["batch"]),
            r["mode"],
            str(r["transactions"]),
            str(r["cycles"]),
            f"{r['sim_seconds']:.2f}",
            f"{r['instructions_per_s']:.0f}",
            f"{r['vs_batch']:.2f}x",
        ]
        for r in result["rows"]
    ]
    return "\n".join(lines + _table(header, rows))
