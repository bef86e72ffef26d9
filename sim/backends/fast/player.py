"""The compiled RT-unit player: wave programs issued to the ``rt_unit`` and ``ds_bvh_stack`` RTL
under the CU model's RT-unit-mode timing rules, with no Python in the simulation loop.

A ray's path through the BVH does not depend on timing, so the traversal loop records each
wave's instructions and expected results first (:class:`gpurtl.golden.traversal.program.
WavePrograms`); the player (``player_driver.cpp``, a package data file beside this module, and
one Verilated model of :class:`PlayerUnit`: the ``rt_unit`` build and a ``ds_bvh_stack`` side by
side) then issues them:

* the shader side follows :func:`gpurtl.golden.cu.rt_unit.run` rule for rule: wave slots taking
  the waves in dispatch order (a slot takes the next wave the cycle after its wave ends), the SIMD
  of slot ``s`` is ``s % simds`` (one wave's VALU work at a time: set-up, each iteration's
  branches, shading), one memory instruction issued a cycle (lowest ready slot first), the
  texture address path offering one lane a cycle to the RT unit's ``inst`` stream (``last`` on
  an instruction's final lane, ``tag`` the slot), the wave going on once the RT unit's
  ``bvhcnt`` of its slot reads 0 after its last result, the LDS stack unit (one lane a cycle,
  ``lds_latency`` after the last);
* the levels below the L0 answer the RT unit's ``mem_req`` as
  :class:`gpurtl.golden.cu.rt_unit.HierarchyPort` over :class:`gpurtl.golden.memory.Hierarchy`
  does (ported to C++: LRU sets with fill times, ports with a bandwidth, MSHRs, default hints),
  with the node lines of the programs, warmed in every level below L0;
* every lane's stack request goes through the ``ds_bvh_stack`` RTL in the same model (in the
  order the intersect instructions complete; the LDS timing is the CU model's rule, as in the
  session loop), its ``base`` moved to the wave's slot.

Every ``out.result`` and every stack response is compared with the programs' expected words (a
difference is a mismatch naming wave, iteration, lane and field); every timing decision
(refusals, L0 hits, results' cycles, ``bvhcnt``) is the RTL's.
"""

import json
import subprocess
import time
from pathlib import Path

import numpy as np
from amaranth.lib import data

from gpurtl.facts.waitcnt import profile

from ...core import layouts, registry
from ...core.registry import Block
from ...harness.backend import cpu_seconds
from .build import model as build_model
from .cycle_source import config_header
from .player_top import PlayerUnit, split_params
from .player_top import build as build_unit
from .run import work_dir

__all__ = [
    "PlayerError",
    "PlayerResult",
    "PlayerUnit",
    "player_block",
    "player_model",
    "run_player",
]

_HERE = Path(__file__).parent
#: ``bvhcnt`` at which the RT unit refuses a wave's next instruction (GFX12's maximum, as
#: :mod:`gpurtl.golden.cu.rt_unit` reads it)
_BVHCNT_MAX = profile("gfx12").max("bvh")


class PlayerError(RuntimeError):
    """The player could not run the programs (a result for no waiting wave, a cycle limit)."""


def _layouts(**params):
    """The :class:`PlayerUnit` layouts without building it (the cached runs need them): each
    side as :func:`~gpurtl.hdl.rt_unit.cycle.cycle_layouts` gathers its block's ports."""
    rt, ds = split_params(params)
    rt_in, rt_out = registry.get("rt_unit").layouts(**rt)
    request, response = registry.get("ds_bvh_stack").layouts(**ds)
    stream_in = data.StructLayout({"valid": 1, "payload": request})
    stream_out = data.StructLayout({"valid": 1, "payload": response})
    ready = data.StructLayout({"ready": 1})
    ds_in = data.StructLayout({"i": stream_in, "o": ready})
    ds_out = data.StructLayout({"i": ready, "o": stream_out})
    return (
        data.StructLayout({"rt": rt_in, "ds": ds_in}),
        data.StructLayout({"rt": rt_out, "ds": ds_out}),
    )


def _no_model(**params):
    raise NotImplementedError(
        "the player has no golden model of its own: it checks the RTL against the wave "
        "programs' expected results"
    )


def player_block():
    """The player's :class:`~gpurtl.sim.core.registry.Block` (not registered: the build
    functions need it, ``gpurtl list`` does not). Its parameters are those of ``rt_unit``
    prefixed ``rt_`` and of ``ds_bvh_stack`` prefixed ``ds_``."""
    return Block(
        name="rt_player",
        doc="the rt_unit build and a ds_bvh_stack in one model, for the wave-program player",
        kind="cycle",
        build=build_unit,
        golden=_no_model,
        layouts=_layouts,
        stimulus=_no_model,
    )


def _wide_fields(prefix, layout):
    """``Field`` constants of the leaves wider than 64 bits (``config_header`` has the rest)."""
    out = []
    for leaf in layouts.leaves(layout):
        if leaf.width > 64:
            name = "".join(c if c.isalnum() else "_" for c in leaf.path).strip("_")
            out.append(f"static const Field {prefix}_{name} = {{{leaf.offset}, {leaf.width}}};")
    return out


def _driver_files(top, block, params):
    in_layout, out_layout = block.layouts(**params)
    header = config_header(top, block, params)
    header += "\n".join(_wide_fields("IN", in_layout) + _wide_fields("OUT", out_layout)) + "\n"
    rt, _ = split_params(params)
    header += f"static const int TAG_BITS = {rt['tag_bits']};\n"
    return {
        "driver.cpp": (_HERE / "player_driver.cpp").read_text(),
        "cycle_common.h": (_HERE / "cycle_common.h").read_text(),
        "cycle_model.h": (_HERE / "cycle_model.h").read_text(),
        "cycle_config.h": header,
    }


def player_model(rt, stack, *, log=None, fp_cores="rtl"):
    """The compiled player for the ``rt_unit`` parameters ``rt`` and ``ds_bvh_stack``
    parameters ``stack`` (both resolved), built when missing (the fast backend's cache)."""
    params = {f"rt_{k}": v for k, v in rt.items()}
    params.update({f"ds_{k}": v for k, v in stack.items()})
    return build_model(
        player_block(),
        params,
        top="stalled",
        log=log,
        fp_cores=fp_cores,
        driver=_driver_files,
    )


class PlayerResult:
    """What the player measured.

    Attributes
    ----------
    cycles : int
        Cycles of the run (as :class:`gpurtl.golden.cu.rt_unit.RtRun` counts them).
    instructions : list of (wave, kind, issue, complete)
        Every wave instruction in the order it completed, ``kind`` ``"bvh"`` or ``"ds"``.
    waves : (W, 3) int64 array
        Per wave: its slot, the cycle it was launched and the cycle its slot freed.
    lookups : dict
        L0 ``hit``, ``pending_hit``, ``miss`` (the RT unit's ``event`` output).
    refused : dict
        Cycles the lane offered was not taken: ``full`` (an instruction's first lane, its wave's
        ``bvhcnt`` at 7) and ``other`` (ray buffer, L0).
    busy : int
        Cycles with some ``bvhcnt`` above 0.
    results : int
        Results that left the RT unit.
    in_flight : dict
        Lanes taken by the RT unit whose result has not left (the ray buffer's occupancy and
        the accelerator's): ``max`` and ``mean`` over the run's cycles.
    mismatches : int
        Output fields that differ from the expected words (results and stack responses).
    first_mismatches : list of dict
        The first ones: ``wave``, ``iteration`` (within the wave), ``lane``, ``field``,
        ``got``, ``want``, ``cycle``.
    stack_checked : int
        Stack responses compared.
    memory : dict
        Per level below L0: accesses, hits, pending hits, misses.
    sim_seconds, cpu_seconds, build_seconds : float
        Wall time and CPU time of the driver process, and of getting the model.
    """

    def __init__(self, summary, records, waves):
        self.cycles = summary["cycles"]
        kinds = ("bvh", "ds")
        self.instructions = [(int(w), kinds[int(k)], int(i), int(c)) for w, k, i, c in records]
        self.waves = waves
        self.lookups = summary["lookups"]
        self.refused = summary["refused"]
        self.busy = summary["busy"]
        self.results = summary["results"]
        self.in_flight = summary["in_flight"]
        self.mismatches = summary["mismatches"]
        self.first_mismatches = summary["first_mismatches"]
        self.stack_checked = summary["stack_checked"]
        self.memory = summary["memory"]
        self.sim_seconds = self.cpu_seconds = self.build_seconds = 0.0


def _write_programs(programs, path):
    """The programs as the driver reads them: per array a ``u64`` element count, then the
    elements (``i64`` offsets and cycles, ``u32`` the rest), in a fixed order."""
    p = programs
    i64 = [p.wave_iters, p.wave_setup_valu, p.wave_shade_valu, p.iter_lanes, p.iter_valu]
    u32 = [
        p.lane,
        p.dual,
        p.origin,
        p.dir,
        p.extent,
        p.instance_mask,
        p.node_ptr,
        p.pointer_flags,
        p.desc,
        p.result_dw,
        p.result_origin,
        p.result_dir,
        p.result_status,
        p.stack_op,
        p.stack_addr,
        p.stack_last,
        p.stack_data,
        p.stack_prim_range,
        p.stack_tri_size_opt,
        p.stack_new_addr,
        p.stack_dst,
        p.stack_error,
        p.lines.astype(np.uint32),
        p.line_words,
    ]
    with open(path, "wb") as f:
        for array in i64:
            a = np.ascontiguousarray(array, dtype="<i8")
            np.array([a.size], "<u8").tofile(f)
            a.tofile(f)
        for array in u32:
            a = np.ascontiguousarray(array, dtype="<u4")
            np.array([a.size], "<u8").tofile(f)
            a.tofile(f)


def _write_timing(path, *, slots, params, rt, stack_size):
    """The timing parameters as the driver reads them: whitespace-separated numbers."""
    levels = params.levels[1:]
    numbers = [
        slots,
        params.simds,
        params.lds_latency,
        rt["beats"],
        _BVHCNT_MAX,
        stack_size * 32,
        len(levels),
    ]
    text = " ".join(str(int(n)) for n in numbers)
    for lv in levels:
        text += f"\n{int(lv.size)} {int(lv.ways)} {float(lv.delta)!r} "
        text += f"{float(lv.lines_per_cycle)!r} {int(lv.mshrs)}"
    Path(path).write_text(text + "\n")


def run_player(programs, rt, params, *, model=None, max_cycles=10**9, log=None, fp_cores="rtl"):
    """Play ``programs`` (:class:`~gpurtl.golden.traversal.program.WavePrograms`) on the RTL of
    the ``rt_unit`` parameters ``rt`` (resolved; ``2 ** tag_bits`` wave slots) under the timing
    rules of the CU parameters ``params`` (``simds``, ``lds_latency``; the levels below L0 are
    ``params.levels[1:]``; the VALU cycles are the programs'). ``model``: a
    :func:`player_model` already built. A :class:`PlayerResult`."""
    for level in params.levels[1:]:
        if level.scope is not None:
            raise ValueError(f"the player models levels without a scope, not {level.name}'s")
    programs.check()
    slots = 1 << rt["tag_bits"]
    stack = registry.get("ds_bvh_stack").resolve(
        {"stack_size": programs.stack_size, "waves": slots, "lanes": 32}
    )
    started = time.monotonic()
    model = model or player_model(rt, stack, log=log, fp_cores=fp_cores)
    build_seconds = time.monotonic() - started
    if len(programs.lines) and int(programs.lines.max()) >> rt["line_bits"]:
        raise ValueError(f"the node lines need more than `line_bits`={rt['line_bits']}")
    with work_dir() as work:
        work = Path(work)
        _write_programs(programs, work / "programs.bin")
        _write_timing(
            work / "timing.txt", slots=slots, params=params, rt=rt, stack_size=stack["stack_size"]
        )
        started, cpu = time.monotonic(), cpu_seconds()
        done = subprocess.run(
            [
                str(model.executable),
                str(work / "programs.bin"),
                str(work / "timing.txt"),
                str(work / "records.bin"),
                str(work / "waves.bin"),
                str(max_cycles),
            ],
            capture_output=True,
            text=True,
        )
        sim_seconds, cpu = time.monotonic() - started, cpu_seconds() - cpu
        lines = done.stdout.strip().splitlines()
        if not lines or not lines[-1].startswith("{"):
            raise PlayerError(
                f"the player failed (exit status {done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        summary = json.loads(lines[-1])
        if "error" in summary:
            raise PlayerError(f"the player stopped: {summary['error']}")
        records = np.fromfile(work / "records.bin", "<i8").reshape(-1, 4)
        waves = np.fromfile(work / "waves.bin", "<i8").reshape(-1, 3)
    result = PlayerResult(summary, records, waves)
    result.sim_seconds, result.cpu_seconds = sim_seconds, cpu
    result.build_seconds = build_seconds
    return result
