"""The ``gpu`` backend's kernel: the sliced backend's levelised and-inverter graph as CUDA,
compiled by NVRTC through CuPy (``cupy.RawKernel``).

``sliced_kernel.cu`` (package data beside this module) is a template filled per design by
:func:`kernel_source`: one thread runs 32 lanes, one bit of each 32-bit signal word per lane;
lane ``g`` of ``lanes`` runs transactions ``g, g + lanes, ...`` under its own random valid/ready
stalls (the first ``free_run`` transactions, each lane's share, with none), and every gate is one
line of straight-line code the compiler keeps in registers where it can. The records are the CPU
driver's (:mod:`.driver`), written to device memory; :func:`timing_summary` finds the latency and
interval errors in them and :func:`gpu_run` returns them for
:func:`gpurtl.sim.backends.sliced.run.compare`.

A graph with behavioural FP32 cores, or above :data:`STRAIGHT_LINE_GATES` gates, runs instead
on the interpreted kernel ``sliced_interp.cu`` (:func:`interp_source`), which reads the graph as
data (:func:`interp_program`): the same driver, the gates level by level from device memory, the
cores computed with the fast backend's ``fp32_ops.h``.

Both sources compile as C++ with ``SLICED_HOST`` defined, every thread in turn
(:func:`host_source`, :func:`host_interp_source`): the tests run the kernels' logic on a
machine without a GPU.

``python -m gpurtl.sim.backends.sliced BLOCK --rows N --replicas R`` (:func:`main`) measures the kernel's
throughput on ``N * R`` transactions (the ``N`` golden rows repeated ``R`` times, every output
compared on the device) and prints one JSON line with its provenance.
"""

import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

from ...core.export import ToolchainError
from ...core.words import words_of
from .driver import depth_first, latch_order

__all__ = [
    "CORE_UNITS",
    "GPU_LANES_PER_TRANSACTION",
    "GpuModel",
    "InterpProgram",
    "STRAIGHT_LINE_GATES",
    "run_rows_gpu",
    "cuda",
    "gpu_run",
    "host_interp_source",
    "host_source",
    "interp_program",
    "interp_source",
    "interpreted",
    "kernel_source",
    "lanes_for",
    "main",
    "threshold_of",
    "timing_summary",
]

#: Transactions per lane the backend aims at: enough that a lane's pipeline is full for most of
#: its run and that lanes have two stall-free transactions (their interval is checked).
GPU_LANES_PER_TRANSACTION = 16

#: Threads per CUDA block.
BLOCK_THREADS = 128

#: Error flags of the kernel.
EARLY_OUTPUT, IDLE = 1, 2

_HERE = Path(__file__).parent


def threshold_of(p):
    """A stall probability as the kernel's threshold, a multiple of 1/256."""
    if p >= 1.0:
        return 256
    if p <= 0.0:
        return 0
    return min(255, max(1, int(p * 256.0 + 0.5)))


def lanes_for(count):
    """Lanes (a multiple of 32) for ``count`` transactions: about
    :data:`GPU_LANES_PER_TRANSACTION` per lane."""
    threads = max(1, -(-count // (32 * GPU_LANES_PER_TRANSACTION)))
    return 32 * threads


def _literal(lit):
    node = lit >> 1
    if node == 0:
        return "0xFFFFFFFFu" if lit & 1 else "0u"
    return f"~n{node}" if lit & 1 else f"n{node}"


def kernel_source(graph, in_width, out_width):
    """CUDA source of the bit-sliced kernel of the :class:`~.netlist.Aig` ``graph`` (a pipeline
    with ``i``/``o`` streams of payload widths ``in_width`` and ``out_width``)."""
    if graph.cores:
        raise ValueError(
            "the gpu kernel has no behavioural FP32 cores; build the graph with the RTL's"
        )
    payload_nodes = [graph.input_node("i__payload", k) for k in range(in_width)]
    out_payload = graph.output("o__payload")
    if len(out_payload) != out_width:
        raise ValueError(f"`o__payload` has {len(out_payload)} bits, not {out_width}")
    declare = [f"    u32 n{1 + k} = 0;" for k in range(len(graph.inputs))]
    declare += [
        f"    u32 n{graph.first_latch + k} = {'0xFFFFFFFFu' if init else '0u'};"
        for k, (_, init) in enumerate(graph.latches)
    ]
    # depth-first, as on the CPU: a value is read soon after it is made (fewer live registers)
    gates = [
        f"        const u32 n{graph.first_and + k} = "
        f"{_literal(graph.ands[k][0])} & {_literal(graph.ands[k][1])};"
        for k in depth_first(graph)
    ]
    set_payload = [
        f"            n{node} = (n{node} & keep) | (((row[{b >> 5}] >> {b & 31}) & 1u) << j);"
        for b, node in enumerate(payload_nodes)
    ]
    get_payload = []
    for w in range(words_of(out_width)):
        get_payload.append("            word = 0;")
        for b in range(32 * w, min(out_width, 32 * w + 32)):
            get_payload.append(
                f"            word |= ((({_literal(out_payload[b])}) >> j) & 1u) << {b - 32 * w};"
            )
        get_payload.append(f"            record[{w}] = word;")
    latch_next = []
    for k, ((lit, _), enable) in enumerate(zip(graph.latches, graph.enables)):
        node = f"n{graph.first_latch + k}"
        value = (
            _literal(lit)
            if enable == 1
            else f"({_literal(enable)} & {_literal(lit)}) | (~{_literal(enable)} & {node})"
        )
        latch_next.append(f"        const u32 x{k} = {value};")
    latch_next += [f"        n{graph.first_latch + k} = x{k};" for k in range(len(graph.latches))]
    values = {
        "TOP": graph.top,
        "IN_WORDS": str(words_of(in_width)),
        "OUT_WORDS": str(words_of(out_width)),
        "DECLARE": "\n".join(declare),
        "SET_PAYLOAD": "\n".join(set_payload),
        "VALID": f"n{graph.input_node('i__valid')}",
        "READY": f"n{graph.input_node('o__ready')}",
        "GATES": "\n".join(gates),
        "I_READY": _literal(graph.output("i__ready")[0]),
        "O_VALID": _literal(graph.output("o__valid")[0]),
        "GET_PAYLOAD": "\n".join(get_payload),
        "LATCH_NEXT": "\n".join(latch_next),
    }
    return _filled("sliced_kernel.cu", values)


def _filled(template, values):
    """The kernel template ``template`` with the lanes' code (``sliced_lanes.h``) and
    ``values`` in place of its ``@NAME@`` fields."""
    text = (_HERE / template).read_text()
    for name, value in {"LANES": (_HERE / "sliced_lanes.h").read_text(), **values}.items():
        if f"@{name}@" not in text:
            raise ValueError(f"the kernel template {template} has no @{name}@")
        text = text.replace(f"@{name}@", value)
    return text


#: The behavioural cores' units in the interpreted kernel's numbering (``sliced_interp.cu``),
#: with their operand counts.
CORE_UNITS = {
    "add": 3,
    "mul": 2,
    "fma": 3,
    "div": 2,
    "rcp": 1,
    "cmp": 2,
    "minmax": 2,
    "f2i": 2,
    "i2f": 2,
}

#: Words of the interpreted kernel's program header and of one core in its core table.
_HEADER_WORDS, _CORE_WORDS = 23, 10


class InterpProgram:
    """The graph as the interpreted kernel's data (:func:`interp_program`).

    Attributes
    ----------
    words : numpy.ndarray
        The program (``uint32``): the header, then its sections.
    nodes : int
        Node values per thread (the kernel's ``v`` holds ``nodes`` x threads words).
    line_words : int
        Delay-line words per thread of all the cores.
    held : int
        Latches updated through temporaries.
    """

    def __init__(self, words, nodes, line_words, held):
        self.words, self.nodes, self.line_words, self.held = words, nodes, line_words, held

    def bytes_per_thread(self):
        """Device memory per thread of 32 lanes, the records aside."""
        return 4 * (self.nodes + self.line_words + self.held)


def _levelled(graph):
    """``(graph, held, level_start)``: ``graph`` with its latches in the order they take their
    next state (:func:`~.driver.latch_order`, the held ones last) and its gates level by level
    (a gate after every gate it reads, and none reading a gate of its own level)."""
    in_place, held = latch_order(graph)
    level = graph.gate_levels()
    graph = graph.renumbered(in_place + held, sorted(range(len(level)), key=level.__getitem__))
    counts = np.bincount(np.asarray(level, dtype=np.int64), minlength=graph.levels + 1)[1:]
    level_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return graph, len(held), level_start


def interp_program(graph, in_width, out_width):
    """The :class:`InterpProgram` of the :class:`~.netlist.Aig` ``graph`` (a pipeline with
    ``i``/``o`` streams of payload widths ``in_width`` and ``out_width``; behavioural cores
    allowed): the data ``sliced_interp.cu`` runs."""
    if len(graph.output("o__payload")) != out_width:
        raise ValueError(
            f"`o__payload` has {len(graph.output('o__payload'))} bits, not {out_width}"
        )
    graph, held, level_start = _levelled(graph)
    payload_out = graph.output("o__payload")
    table, lits, line = [], [], 0
    for core in graph.cores:
        if core.unit not in CORE_UNITS:
            raise ValueError(f"the gpu kernel has no behavioural `{core.unit}` core")
        operands = CORE_UNITS[core.unit]
        if len(core.operands) != operands:
            raise ValueError(
                f"a `{core.unit}` core has {len(core.operands)} operands, not {operands}"
            )
        results = -(-core.bits // 32)
        table += [
            list(CORE_UNITS).index(core.unit),
            int(core.ftz),
            core.stages,
            results,
            core.en,
            core.first,
            line,
            len(lits),
            operands,
            core.bits,
        ]
        for operand in core.operands:
            lits += [operand[b] if b < len(operand) else 0 for b in range(32)]
        line += core.stages * results * 32
    sections = [
        level_start,
        [a for a, _ in graph.ands],
        [b for _, b in graph.ands],
        [lit for lit, _ in graph.latches],
        graph.enables,
        [int(bool(init)) for _, init in graph.latches],
        [graph.input_node("i__payload", k) for k in range(in_width)],
        payload_out,
        table,
        lits,
    ]
    header = [
        graph.first_and,
        len(graph.ands),
        len(level_start) - 1,
        graph.first_latch,
        len(graph.latches),
        held,
        len(graph.cores),
        in_width,
        out_width,
        graph.input_node("i__valid"),
        graph.input_node("o__ready"),
        graph.output("i__ready")[0],
        graph.output("o__valid")[0],
    ]
    offset = _HEADER_WORDS
    for section in sections:
        header.append(offset)
        offset += len(section)
    assert len(header) == _HEADER_WORDS and len(table) == _CORE_WORDS * len(graph.cores)
    words = np.concatenate([np.asarray(part, dtype=np.int64) for part in [header, *sections]])
    if words.max(initial=0) >= 1 << 32:
        raise ValueError("the graph is too large for the kernel's 32-bit program")
    return InterpProgram(words.astype(np.uint32), graph.nodes, line, held)


def interp_source(in_width, out_width):
    """CUDA source of the interpreted kernel for payloads of ``in_width`` and ``out_width``
    bits (the graph itself is :func:`interp_program`'s data)."""
    from ..fast.behavioural import ops_header

    values = {
        "FP32_OPS": ops_header(),
        "IN_WORDS": str(words_of(in_width)),
        "OUT_WORDS": str(words_of(out_width)),
    }
    return _filled("sliced_interp.cu", values)


_HOST_INTERP_MAIN = r"""
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>
// The interpreted kernel on the host: PROG IN OUT COUNT ROWS LANES SEED P_VALID P_READY
// FREE_RUN MAX_IDLE NODES LINE_WORDS HELD; prints {"clock_cycles": N, "flags": F}.
int main(int argc, char** argv) {
    if (argc != 15) return 2;
    u64 count = strtoull(argv[4], nullptr, 10), rows_count = strtoull(argv[5], nullptr, 10);
    u64 lanes = strtoull(argv[6], nullptr, 10), seed = strtoull(argv[7], nullptr, 10);
    u32 p_valid = (u32)atoi(argv[8]), p_ready = (u32)atoi(argv[9]);
    u64 free_run = strtoull(argv[10], nullptr, 10), max_idle = strtoull(argv[11], nullptr, 10);
    u64 nodes = strtoull(argv[12], nullptr, 10), line_words = strtoull(argv[13], nullptr, 10);
    u64 held_count = strtoull(argv[14], nullptr, 10);
    FILE* p = fopen(argv[1], "rb");
    if (!p) return 3;
    std::vector<u32> prog;
    u32 word;
    while (fread(&word, 4, 1, p) == 1) prog.push_back(word);
    fclose(p);
    std::vector<u32> rows(rows_count * IN_WORDS), records(count * RECORD_WORDS);
    FILE* in = fopen(argv[2], "rb");
    if (!in || fread(rows.data(), 4, rows.size(), in) != rows.size()) return 3;
    fclose(in);
    u64 threads = (lanes + 31) / 32;
    std::vector<u32> v(nodes * threads), line(line_words * threads + 1), held(held_count * threads + 1);
    u32 flags = 0;
    u64 clock_cycles = 0;
    for (u64 thread = 0; thread < threads; thread++)
        sliced_interp(prog.data(), v.data(), line.data(), held.data(), threads, rows.data(),
                      records.data(), count, rows_count, lanes, seed, p_valid, p_ready,
                      free_run, max_idle, &flags, &clock_cycles, thread);
    FILE* out = fopen(argv[3], "wb");
    if (!out || fwrite(records.data(), 4, records.size(), out) != records.size()) return 4;
    fclose(out);
    printf("{\"clock_cycles\": %" PRIu64 ", \"flags\": %u}\n", clock_cycles, flags);
    return 0;
}
"""


def host_interp_source(in_width, out_width):
    """:func:`interp_source` as C++ for the host, with a ``main`` that runs every thread in
    turn (``PROG IN OUT COUNT ROWS LANES SEED P_VALID P_READY FREE_RUN MAX_IDLE NODES
    LINE_WORDS HELD``)."""
    return "#define SLICED_HOST 1\n" + interp_source(in_width, out_width) + _HOST_INTERP_MAIN


_HOST_MAIN = r"""
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>
// The kernel on the host: IN OUT COUNT ROWS LANES SEED P_VALID P_READY FREE_RUN MAX_IDLE (the
// probabilities as thresholds of 256); prints {"clock_cycles": N, "flags": F}.
int main(int argc, char** argv) {
    if (argc != 11) return 2;
    u64 count = strtoull(argv[3], nullptr, 10), rows_count = strtoull(argv[4], nullptr, 10);
    u64 lanes = strtoull(argv[5], nullptr, 10), seed = strtoull(argv[6], nullptr, 10);
    u32 p_valid = (u32)atoi(argv[7]), p_ready = (u32)atoi(argv[8]);
    u64 free_run = strtoull(argv[9], nullptr, 10), max_idle = strtoull(argv[10], nullptr, 10);
    std::vector<u32> rows(rows_count * IN_WORDS), records(count * RECORD_WORDS);
    FILE* in = fopen(argv[1], "rb");
    if (!in || fread(rows.data(), 4, rows.size(), in) != rows.size()) return 3;
    fclose(in);
    u32 flags = 0;
    u64 clock_cycles = 0;
    for (u64 thread = 0; thread * 32 < lanes; thread++)
        sliced_run(rows.data(), records.data(), count, rows_count, lanes, seed, p_valid, p_ready,
                   free_run, max_idle, &flags, &clock_cycles, thread);
    FILE* out = fopen(argv[2], "wb");
    if (!out || fwrite(records.data(), 4, records.size(), out) != records.size()) return 4;
    fclose(out);
    printf("{\"clock_cycles\": %" PRIu64 ", \"flags\": %u}\n", clock_cycles, flags);
    return 0;
}
"""


def host_source(graph, in_width, out_width):
    """:func:`kernel_source` as C++ for the host, with a ``main`` that runs every thread in turn
    (``IN OUT COUNT ROWS LANES SEED P_VALID P_READY FREE_RUN MAX_IDLE``)."""
    return "#define SLICED_HOST 1\n" + kernel_source(graph, in_width, out_width) + _HOST_MAIN


def timing_summary(records, out_words, lanes, free_run, latency, ii, xp=np):
    """The latency and interval errors of the stall-free transactions in ``records`` (an
    array of records, numpy or CuPy as ``xp``): the driver summary's fields ``latency_errors``,
    ``first_latency_error``, ``ii_errors``, ``first_ii_error`` and ``first_ii_gap``.

    Transaction ``t < free_run`` must take exactly ``latency`` cycles; when ``t + lanes`` (the
    next transaction of its lane) is stall-free too, it must be accepted ``ii`` cycles after
    ``t``."""
    count = records.shape[0]
    free = min(free_run, count)
    head = records[:free]
    accept = head[:, out_words].astype(xp.int64) | (head[:, out_words + 1].astype(xp.int64) << 32)
    emit = head[:, out_words + 2].astype(xp.int64) | (head[:, out_words + 3].astype(xp.int64) << 32)
    summary = {"latency_errors": 0, "first_latency_error": -1, "ii_errors": 0}
    summary.update({"first_ii_error": -1, "first_ii_gap": 0})
    if latency is not None and free:
        bad = xp.flatnonzero(emit - accept != latency)
        summary["latency_errors"] = int(bad.size)
        if bad.size:
            summary["first_latency_error"] = int(bad[0])
    if ii and free > lanes:
        gaps = accept[lanes:] - accept[: free - lanes]
        bad = xp.flatnonzero(gaps != ii)
        summary["ii_errors"] = int(bad.size)
        if bad.size:
            first = int(bad[0])
            summary["first_ii_error"] = first + lanes
            summary["first_ii_gap"] = int(gaps[first])
    return summary


def cuda():
    """CuPy, when it is installed and sees a CUDA device; raises
    :class:`~gpurtl.sim.core.export.ToolchainError` in one line otherwise."""
    try:
        import cupy
    except ImportError:
        raise ToolchainError(
            "the gpu backend needs CuPy and a CUDA device (pip install cupy-cuda12x); CuPy is "
            "not installed"
        ) from None
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy raises its runtime's own errors without a driver
        raise ToolchainError(
            f"the gpu backend needs a CUDA device; CuPy found none ({error})"
        ) from None
    if devices < 1:
        raise ToolchainError("the gpu backend needs a CUDA device; CuPy found none")
    return cupy


@functools.lru_cache(maxsize=8)
def _kernel(source, interpreted):
    cupy = cuda()
    if interpreted:
        # no contraction into fused multiply-adds: the cores' float64 steps round as on the CPU
        return cupy.RawKernel(source, "sliced_interp", options=("--std=c++14", "--fmad=false"))
    return cupy.RawKernel(source, "sliced_run", options=("--std=c++14",))


def gpu_run(
    source,
    rows,
    count,
    *,
    lanes,
    seed=0,
    p_valid=1.0,
    p_ready=1.0,
    free_run=0,
    max_idle=10_000,
    out_words,
    program=None,
):
    """Run the kernel ``source`` on the word rows ``rows`` (transaction ``t`` reads row
    ``t % len(rows)``) for ``count`` transactions over ``lanes`` lanes; returns ``(records,
    clock_cycles, kernel_seconds, compile_seconds)`` with ``records`` a CuPy array on the
    device. ``program``: the :class:`InterpProgram` of an interpreted kernel
    (:func:`interp_source`). Raises :class:`RuntimeError` when the kernel reports a broken
    stream rule or an idle pipeline, :class:`~gpurtl.sim.core.export.ToolchainError` when the
    device has too little memory for the lanes."""
    cupy = cuda()
    started = time.monotonic()
    kernel = _kernel(source, program is not None)
    try:
        kernel.compile()
    except AttributeError:  # a CuPy without RawKernel.compile compiles on first use
        _ = kernel.kernel
    compile_seconds = time.monotonic() - started
    device_rows = cupy.asarray(np.ascontiguousarray(rows, dtype=np.uint32))
    records = cupy.zeros((count, out_words + 4), dtype=cupy.uint32)
    flags = cupy.zeros(1, dtype=cupy.uint32)
    clock_cycles = cupy.zeros(1, dtype=cupy.uint64)
    threads = lanes // 32
    grid = (-(-threads // BLOCK_THREADS),)
    state = ()
    if program is not None:
        need = program.bytes_per_thread() * threads
        free, _ = cupy.cuda.runtime.memGetInfo()
        if need > free * 0.9:
            raise ToolchainError(
                f"the interpreted kernel needs {need / 2**30:.1f} GiB of device memory for "
                f"{lanes} lanes; the device has {free / 2**30:.1f} GiB free: use a smaller "
                "--count"
            )
        state = (
            cupy.asarray(program.words),
            cupy.zeros(program.nodes * threads, dtype=cupy.uint32),
            cupy.zeros(max(1, program.line_words * threads), dtype=cupy.uint32),
            cupy.zeros(max(1, program.held * threads), dtype=cupy.uint32),
            np.uint64(threads),
        )
    args = state + (
        device_rows,
        records,
        np.uint64(count),
        np.uint64(len(rows)),
        np.uint64(lanes),
        np.uint64(seed),
        np.uint32(threshold_of(p_valid)),
        np.uint32(threshold_of(p_ready)),
        np.uint64(free_run),
        np.uint64(max_idle),
        flags,
        clock_cycles,
    )
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    kernel(grid, (BLOCK_THREADS,), args)
    end.record()
    end.synchronize()
    seconds = cupy.cuda.get_elapsed_time(start, end) / 1000.0
    del state
    flag = int(flags.get()[0])
    if flag & EARLY_OUTPUT:
        raise RuntimeError("the gpu kernel saw an output before its input was accepted")
    if flag & IDLE:
        raise RuntimeError(f"the gpu kernel saw no output for {max_idle} cycles")
    return records, int(clock_cycles.get()[0]), seconds, compile_seconds


#: Gates above which a graph runs on the interpreted kernel: straight-line code of more takes
#: NVRTC minutes (87 s for ``ray_sort``'s 29 540).
STRAIGHT_LINE_GATES = 40_000


def interpreted(graph):
    """Whether ``graph`` runs on the interpreted kernel: it has behavioural cores, or more
    than :data:`STRAIGHT_LINE_GATES` gates."""
    return bool(graph.cores) or len(graph.ands) > STRAIGHT_LINE_GATES


class GpuModel:
    """What :func:`~gpurtl.sim.backends.sliced.run.compare` reads of a model, for a kernel."""

    def __init__(self, block, params, log=None, fp_cores="rtl"):
        from . import build, netlist

        started = time.monotonic()
        text, stubs = build.export(block, params, fp_cores)
        graph, self.synthesis_seconds = netlist.aig(text, block.name, stubs=stubs, log=log)
        self.latency, self.ii, self.in_width, self.out_width = build._facts(block, params)
        self.program = None
        if interpreted(graph):
            self.program = interp_program(graph, self.in_width, self.out_width)
            self.source = interp_source(self.in_width, self.out_width)
        else:
            self.source = kernel_source(graph, self.in_width, self.out_width)
        self.summary = graph.summary()
        self.top = block.name
        self.build_seconds = time.monotonic() - started
        self.lanes = 0


def run_rows_gpu(model, rows, count, *, seed=0, p_valid=1.0, p_ready=1.0, free_run=0):
    """Run ``count`` word rows on the device; returns ``(records, summary, kernel_seconds)``
    with ``records`` on the host and ``summary`` the CPU driver's fields
    (:func:`gpurtl.sim.backends.sliced.run.run_rows`)."""
    lanes = lanes_for(count)
    model.lanes = lanes
    out_words = words_of(model.out_width)
    records, clock_cycles, seconds, compile_seconds = gpu_run(
        model.source,
        rows,
        count,
        lanes=lanes,
        seed=seed,
        p_valid=p_valid,
        p_ready=p_ready,
        free_run=free_run,
        out_words=out_words,
        program=model.program,
    )
    model.build_seconds += compile_seconds
    host = records.get()
    del records
    free = min(free_run, count)
    summary = timing_summary(host, out_words, lanes, free, model.latency, model.ii)
    used = min(lanes, count)
    summary.update({"cycles": clock_cycles * used, "clock_cycles": clock_cycles, "lanes": used})
    summary["free_run"] = free
    return host, summary, seconds


def main(argv=None):
    """``python -m gpurtl.sim.backends.sliced BLOCK [--rows N] [--replicas R] [--repeat K]
    [-p NAME=VALUE ...]``: the kernel's throughput, every output compared with the golden rows
    on the device; one JSON line."""
    import argparse
    import platform

    from ...core.provenance import provenance
    from ...core.registry import get
    from ..fast.run import work_dir, write_stimulus

    parser = argparse.ArgumentParser(prog="python -m gpurtl.sim.backends.sliced")
    parser.add_argument("block")
    parser.add_argument("--rows", type=int, default=1_000_000, help="golden transactions")
    parser.add_argument("--replicas", type=int, default=16, help="times the rows are run")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (the median is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fp-cores",
        choices=("rtl", "behavioural"),
        default="rtl",
        help="the FP32 cores as their RTL's gates or computed on values (the interpreted kernel)",
    )
    parser.add_argument(
        "--lanes",
        type=int,
        default=None,
        help="lanes (a multiple of 32; default: 1 per 16 transactions)",
    )
    parser.add_argument("-p", "--param", action="append", default=[])
    args = parser.parse_args(argv)
    if args.rows < 1 or args.replicas < 1 or args.repeat < 1:
        print("error: --rows, --replicas and --repeat must be positive", file=sys.stderr)
        return 2
    try:
        cupy = cuda()
    except ToolchainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    block = get(args.block)
    params = block.check_params(dict(pair.split("=", 1) for pair in args.param))
    model = GpuModel(block, params, fp_cores=args.fp_cores)
    latency, ii, in_width, out_width = model.latency, model.ii, model.in_width, model.out_width
    source, program = model.source, model.program
    out_words = words_of(out_width)
    count = args.rows * args.replicas
    lanes = lanes_for(count) if args.lanes is None else args.lanes
    if lanes < 32 or lanes % 32:
        print("error: --lanes must be a positive multiple of 32", file=sys.stderr)
        return 2
    free_run = count // 10
    with work_dir() as work:
        in_path, expected_path = Path(work) / "in.bin", Path(work) / "expected.bin"
        golden_seconds = write_stimulus(block, params, args.seed, args.rows, in_path, expected_path)
        rows = np.fromfile(in_path, dtype="<u4").reshape(args.rows, words_of(in_width))
        expected = cupy.asarray(np.fromfile(expected_path, dtype="<u4").reshape(args.rows, -1))
    runs = []
    for k in range(args.repeat):
        records, clock_cycles, seconds, compile_seconds = gpu_run(
            source,
            rows,
            count,
            lanes=lanes,
            seed=args.seed + k,
            p_valid=0.7,
            p_ready=0.7,
            free_run=free_run,
            out_words=out_words,
            program=program,
        )
        got = records[:, :out_words].reshape(args.replicas, args.rows, out_words)
        failed = int(cupy.count_nonzero(cupy.any(got != expected[None], axis=2)))
        timing = timing_summary(records, out_words, lanes, free_run, latency, ii, xp=cupy)
        runs.append(
            {
                "kernel_seconds": seconds,
                "clock_cycles": clock_cycles,
                "compile_seconds": round(compile_seconds, 2),
                "failed": failed + timing["latency_errors"] + timing["ii_errors"],
                "latency_errors": timing["latency_errors"],
                "ii_errors": timing["ii_errors"],
            }
        )
        del records, got
    median = sorted(runs, key=lambda run: run["kernel_seconds"])[(len(runs) - 1) // 2]
    result = {
        "block": block.name,
        "params": params,
        "ands": model.summary["ands"],
        "latches": model.summary["latches"],
        "levels": model.summary["levels"],
        "cores": model.summary.get("cores", 0),
        "kernel": "interpreted" if program is not None else "straight-line",
        "transactions": count,
        "golden_rows": args.rows,
        "lanes": lanes,
        "p_valid": 0.7,
        "p_ready": 0.7,
        "free_run": free_run,
        "golden_seconds": round(golden_seconds, 2),
        "transactions_per_gpu_second": round(count / median["kernel_seconds"]),
        "lane_cycles_per_gpu_second": round(
            median["clock_cycles"] * lanes / median["kernel_seconds"]
        ),
        "median": median,
        "runs": runs,
        "failed": max(run["failed"] for run in runs),
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "host": platform.node(),
        "provenance": provenance(seeds=args.seed),
    }
    print(json.dumps(result))
    return 1 if result["failed"] else 0
