"""The traversal loop on the RTL: ``gpurtl experiment traversal --rtl``.

The shader side of the loop runs in Python (:func:`gpurtl.golden.traversal.loop.wave_program`, the bit-exact
loop of gpurt ``TraceRay3_1.hlsl``), every decision taken from the RTL's outputs: each lane's
``image_bvh8_intersect_ray`` goes through the ``rt_unit`` RTL (node fetch through its L0, the ray
accelerator, per-wave ``bvhcnt`` counting wave instructions: the mode marks each instruction's
last lane with ``last``), cycle by cycle in a session, with the levels below L0 of the
CU model's memory hierarchy behind its memory port
(:class:`gpurtl.golden.cu.rt_unit.HierarchyPort`); each lane's ``ds_bvh_stack_push8_pop1`` goes
through the ``ds_bvh_stack`` RTL in a second session. Both sessions compare every output with
their golden models as it comes out (a difference stops the run: :class:`RtlLoopError`).

The clock is the RT unit's; the scheduling rules of the shader side (VALU work, one memory
instruction a cycle, the texture address path, the LDS unit, the waits on ``bvhcnt``) are the
CU model's RT unit mode, :func:`gpurtl.golden.cu.rt_unit.run`, which this module drives with the
RTL as its RT unit. :func:`compare` runs the CU model on the same waves in that mode (the golden
RT unit: it must agree cycle for cycle) and with its formulas (:func:`gpurtl.golden.cu.simulate`,
the traversal experiment's timing: the difference is measured and bounded).

The RT unit build is :data:`RT_UNIT`, changed by ``--rtl-param NAME=VALUE`` (any ``rt_unit``
registry parameter, :func:`build_changes`); both CU model modes are fed the same build.
"""

import time

import numpy as np

from gpurtl.facts.ds_bvh_stack import StackOp
from gpurtl.golden.cu import WaveTrace, simulate
from gpurtl.golden.memory import Level
from gpurtl.golden.ray_accel.ds_bvh_stack import pack_stack_addr, unpack_stack_addr
from gpurtl.golden.traversal.calibration import rdna4_params

from ...backends import BACKENDS
from ...core import registry
from ...harness.session import MismatchError
from .. import ExperimentFailed

__all__ = [
    "LOOP_BACKENDS",
    "RAYS",
    "RT_UNIT",
    "RtlLoopError",
    "accel_timing",
    "arguments",
    "build_changes",
    "check_against",
    "check_options",
    "compare",
    "cu_params",
    "measure",
    "node_memory",
    "report",
    "rt_unit_params",
    "run_loop",
    "run_programs",
    "utilization",
]

#: The RT unit build of the loop: the smallest accelerator with the triangle-pair path (BVH8
#: leaves), a 2 KB L0 (16 lines, so the small bunny's 385 node lines miss), 4 waves.
RT_UNIT = {
    "size": 2048,
    "ways": 4,
    "mshrs": 4,
    "targets": 4,
    "id_bits": 4,
    "line_bits": 16,
    "tag_bits": 2,
    "engines": 1,
    "boxes_per_engine": 1,
    "triangles": True,
    "transforms": False,
    "fp": "shallow",
}

#: Rays of the run (``--rtl-rays``): default, ``--quick``. Two waves of 32 by default: two of
#: the RT unit's four wave slots busy at once, a few thousand cycles a wave; on the Amaranth
#: simulator the triangle-capable accelerator runs some tens of cycles a second, so the quick
#: run is one wave of four rays.
RAYS = (64, 4)
BACKENDS_RTL = ("pysim", "verilator", "fast", "fast-behavioural")
#: ``--rtl-backend`` values: the sessions' simulators, and ``player``, the compiled RT-unit player
#: (:func:`run_programs`).
LOOP_BACKENDS = (*BACKENDS_RTL, "player")


def arguments(group):
    """The experiment's options of the RTL loop (for ``traversal.arguments``)."""
    import argparse

    def positive(text):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
        return value

    group.add_argument(
        "--rtl",
        action="store_true",
        default=argparse.SUPPRESS,
        help="the loop on the RTL: every intersect through the rt_unit RTL, every stack "
        "instruction through ds_bvh_stack, timed against the CU model (small bunny)",
    )
    group.add_argument(
        "--rtl-rays",
        type=positive,
        metavar="N",
        default=argparse.SUPPRESS,
        help=f"rays of the --rtl run (default {RAYS[0]}, --quick {RAYS[1]})",
    )
    group.add_argument(
        "--rtl-backend",
        choices=LOOP_BACKENDS,
        default=argparse.SUPPRESS,
        help="simulator of the --rtl run (default player: the waves' recorded programs on one "
        "compiled rt_unit + ds_bvh_stack model, no Python a cycle; needs a C++ compiler; "
        "verilator and fast: sessions stepped a cycle a round trip; pysim: no compiler, slow; "
        "--rtl-modes: default pysim)",
    )
    group.add_argument(
        "--rtl-modes",
        action="store_true",
        default=argparse.SUPPRESS,
        help="with --rtl: BVH8 against BVH4x2 (the dual instruction) on the same scene and the "
        "same RT unit build (dual=true), each with its timing",
    )
    group.add_argument(
        "--rtl-param",
        action="append",
        metavar="NAME=VALUE",
        default=argparse.SUPPRESS,
        help="an rt_unit build parameter of the --rtl run (repeatable; `gpurtl list rt_unit`): "
        "L0 size, ways, mshrs, targets, replacement, beats, engines, ...",
    )


#: Simulated cycles between two progress lines of the loop on the RTL.
PROGRESS_CYCLES = 500

#: Parameters the loop cannot run without: BVH8 leaves are triangle pairs.
_NEEDED = {"triangles": True}


def build_changes(pairs, base=None):
    """``{name: value}`` of ``--rtl-param`` texts ``NAME=VALUE``, checked through the ``rt_unit``
    registry entry over ``base`` (``rt_unit`` parameters, default :data:`RT_UNIT`) and the
    loop's needs (``ValueError``, one line)."""
    changes = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--rtl-param must be written NAME=VALUE, not {pair!r}")
        changes[name.strip()] = value.strip()
    try:
        rt = registry.get("rt_unit").resolve(dict(RT_UNIT if base is None else base, **changes))
    except registry.RegistryError as error:
        raise ValueError(f"--rtl-param: {error}") from None
    for name, value in _NEEDED.items():
        if rt[name] != value:
            raise ValueError(
                f"--rtl-param: `{name}` must be {value} for the loop (the BVH8 leaves are "
                f"triangle pairs), not {rt[name]}"
            )
    return {name: rt[name] for name in changes}


def check_options(options):
    """Refuse a bad ``--rtl-param`` before any work (``ValueError``): its values through the
    registry, and a line index wide enough for the packaged bunny's node lines."""
    if "rtl_param" not in options:
        return
    changes = build_changes(options["rtl_param"])
    rt = rt_unit_params(changes)
    if "line_bits" in changes:
        from gpurtl.golden.bvh import mesh as M
        from gpurtl.golden.traversal.scene import build_scene

        need = max(node_memory(build_scene("bunny", M.bunny(), "bvh8"))).bit_length()
        if rt["line_bits"] < need:
            raise ValueError(
                f"--rtl-param: `line_bits` must be at least {need} for the bunny's node lines, "
                f"not {rt['line_bits']}"
            )


class RtlLoopError(ExperimentFailed):
    """The RTL gave an output its golden model does not (or the loop could not go on)."""


def rt_unit_params(changes=None):
    """The ``rt_unit`` parameter dictionary of the loop (:data:`RT_UNIT` with ``changes``)."""
    return registry.get("rt_unit").resolve(dict(RT_UNIT, **(changes or {})))


def accel_timing(rt):
    """``(initiation interval, latency)`` of the RT unit build's ray accelerator."""
    from gpurtl.sim.blocks.rt_unit import top_golden

    accel = top_golden(**rt).accel
    return accel.groups, accel.groups + len(accel.line)


def cu_params(rt, **changes):
    """The CU model's configuration for the same run: RDNA 4's shader side
    (:func:`gpurtl.golden.traversal.calibration.rdna4_params`), ``2 ** tag_bits`` wave slots on two SIMDs with static
    VGPRs, the L0 level with the RT unit's geometry, its hit latency (1 cycle) and misses in
    flight, the levels below as RDNA 4's, the accelerator's initiation interval and latency;
    then ``changes``."""
    base = rdna4_params()
    ii, latency = accel_timing(rt)
    waves = 1 << rt["tag_bits"]
    l0 = Level("L0", rt["size"], rt["ways"], 1, 1.0, rt["mshrs"])
    params = base.replace(
        simds=2,
        slots_per_simd=waves // 2,
        vgpr_mode="static",
        levels=[l0] + base.levels[1:],
        ra_ii=ii,
        ra_latency=latency,
    )
    return params.replace(**changes)


def node_memory(scene):
    """``line -> 1024-bit value`` of a BLAS scene's node image (line = byte offset / 128; a
    legacy 64-byte node at an odd 64-byte offset is the line's upper half)."""
    image = scene.bvhs[0].image
    lines = {}
    for offset in image:
        if offset % 64 == 0:
            half = offset % 128 // 64
            words = list(image[offset])[: 32 - 16 * half]
            value = sum(int(w) << (32 * k) for k, w in enumerate(words))
            lines[offset // 128] = lines.get(offset // 128, 0) | value << (512 * half)
    return lines


class _ProgramSource:
    """A wave of the loop (:func:`gpurtl.golden.traversal.loop.wave_program`) as the CU model's RT unit mode asks
    for it (:func:`gpurtl.golden.cu.rt_unit.run`): its intersect instructions go to the RT unit
    the mode drives, its stack instructions through the ``ds_bvh_stack`` session ``stack``."""

    def __init__(self, index, make_program, stack, tests):
        self.index, self.make_program, self.stack, self.tests = index, make_program, stack, tests
        self.iterations = []  # per intersect: [(lane, line, kind, box, tri)] for the CU model
        self.trace = self.answers = self.items = None

    def start(self, slot):
        self.slot = slot
        self.program = self.make_program(slot)
        return self._intersect(next(self.program))

    def _intersect(self, message):
        _, self.lanes, self.items = message
        return [_kind(i) for i in self.items], [_payload(self.slot, i) for i in self.items]

    def results(self, results):
        self.iterations.append(
            [
                (lane, i["node_ptr"][0] >> 4, *self.tests(i, o))
                for lane, i, o in zip(self.lanes, self.items, results)
            ]
        )
        _, _, requests = self.program.send(results)
        self.answers = _stack(self.stack, requests)
        return len(requests)

    def stacked(self):
        try:
            return self._intersect(self.program.send(self.answers))
        except StopIteration as stop:
            self.trace = stop.value
            return None


def run_loop(
    scene,
    origins,
    directions,
    *,
    backend="pysim",
    rt=None,
    params=None,
    stack_size=16,
    hook=None,
    progress=None,
):
    """Trace ``origins``/``directions`` (float arrays (n, 3); waves of 32 consecutive rays)
    through ``scene`` (a BVH8 BLAS :class:`gpurtl.golden.traversal.loop.Scene`) with every intersect and stack
    instruction on the RTL of ``backend``, under the rules of the CU model's RT unit mode
    (:func:`gpurtl.golden.cu.rt_unit.run`).

    ``rt``: the ``rt_unit`` parameters (default :func:`rt_unit_params`); ``params``: the
    shader side's :class:`~gpurtl.golden.cu.CuParams` (default :func:`cu_params`).
    ``hook(session)`` sees the RT unit's session once it is open (tests corrupt its outputs).
    ``progress(line)`` hears when the sessions are open (the builds are done) and every
    :data:`PROGRESS_CYCLES` simulated cycles.

    Returns a dictionary: per-wave :class:`gpurtl.golden.traversal.loop.WaveTrace` (``traces``), the run
    (:class:`gpurtl.golden.cu.rt_unit.RtRun`: instruction records, cycles, L0 lookups, busy
    cycles), the sessions' passed/failed counts and the CU model's wave traces of the same
    run. Raises :class:`RtlLoopError` at the first output that differs from a golden model."""
    from gpurtl.golden.cu.rt_unit import HierarchyPort, run
    from gpurtl.golden.traversal.loop import node_tests, wave_program

    rt = rt if rt is not None else rt_unit_params()
    ii, latency = accel_timing(rt)
    p = params if params is not None else cu_params(rt)
    slots = 1 << rt["tag_bits"]
    lines = node_memory(scene)
    if max(lines) >> rt["line_bits"]:
        raise ValueError(f"the scene's node lines need more than `line_bits`={rt['line_bits']}")
    memory = HierarchyPort(
        p.levels[1:], make_line=lambda line: lines.get(line, 0), warm=lines, beats=rt["beats"]
    )
    stack_block = registry.get("ds_bvh_stack")
    stack_params = stack_block.resolve({"stack_size": stack_size, "waves": slots, "lanes": 32})
    base_of = stack_block.golden(**stack_params).base_of
    rt_block = registry.get("rt_unit")
    chosen = BACKENDS[backend]
    started = time.monotonic()
    try:
        with (
            chosen.session(rt_block, rt, golden=True, strict=True) as rt_s,
            chosen.session(stack_block, stack_params, golden=True, strict=True) as ds_s,
        ):
            if hook is not None:
                hook(rt_s)
            if progress is not None:
                progress(f"RTL sessions open after {time.monotonic() - started:.0f} s; simulating")
            step = rt_s.apply
            if progress is not None:
                cycle = [0]

                def step(inputs):
                    cycle[0] += 1
                    if cycle[0] % PROGRESS_CYCLES == 0:
                        progress(
                            f"cycle {cycle[0]}: the RT unit's outputs of every cycle and "
                            f"{ds_s.report.passed} stack results equal to the golden models'"
                        )
                    return rt_s.apply(inputs)

            class Unit:  # the RT unit RTL, one cycle a step
                pass

            Unit.step = staticmethod(step)

            def program(first):
                # the wave's stacks are in the LDS region of the slot it runs in
                return lambda slot: wave_program(
                    scene,
                    origins[first : first + 32],
                    directions[first : first + 32],
                    stack_size=stack_size,
                    bases=[base_of(slot, lane) for lane in range(32)],
                )

            sources = [
                _ProgramSource(index, program(first), ds_s, node_tests)
                for index, first in enumerate(range(0, len(origins), 32))
            ]
            out = run(sources, p, Unit, memory, slots=slots, idle=_zero_payload(rt))
            sessions = {
                "rt_unit": [rt_s.report.passed, rt_s.report.failed],
                "ds_bvh_stack": [ds_s.report.passed, ds_s.report.failed, ds_s.received],
            }
    except MismatchError as error:
        raise RtlLoopError(f"RTL output differs from the golden model: {error}") from None
    return {
        "run": out,
        "cycles": out.cycles,
        "records": out.instructions,
        "lookups": out.lookups,
        "busy": out.busy,
        "accel_results": out.results,
        "traces": [s.trace for s in sources],
        "cu_waves": [WaveTrace(s.iterations, [], tag=s.index) for s in sources],
        "accel_ii": ii,
        "accel_latency": latency,
        "rt": rt,
        "params": p,
        "warm": list(lines),
        "sessions": sessions,
        "wall_s": time.monotonic() - started,
    }


def run_programs(scene, origins, directions, *, rt=None, params=None, stack_size=16, progress=None):
    """:func:`run_loop` on the compiled RT-unit player (:mod:`gpurtl.sim.backends.fast.player`):
    the per-wave loop records each wave's instructions and expected results first
    (:func:`gpurtl.golden.traversal.program.from_loop`, golden models), then one compiled
    ``rt_unit`` + ``ds_bvh_stack`` model plays them under the same rules of the CU model's RT
    unit mode, comparing every output with the expected words. The same dictionary as
    :func:`run_loop`'s (``sessions`` holds the player's counts); raises :class:`RtlLoopError`
    when an output differs."""
    from gpurtl.golden.traversal.program import from_loop

    from ...backends.fast.player import run_player

    rt = rt if rt is not None else rt_unit_params()
    ii, latency = accel_timing(rt)
    p = params if params is not None else cu_params(rt)
    started = time.monotonic()
    programs = from_loop(scene, origins, directions, p, stack_size=stack_size)
    if progress is not None:
        progress(f"{programs.waves} wave programs recorded; playing them on the RTL")
    out = run_player(programs, rt, p, log=progress)
    if out.mismatches:
        first = out.first_mismatches[0]
        raise RtlLoopError(
            f"RTL output differs from the expected result: {out.mismatches} fields, the first "
            f"wave {first['wave']} iteration {first['iteration']} lane {first['lane']} "
            f"`{first['field']}` = {first['got']:#x}, expected {first['want']:#x} (cycle "
            f"{first['cycle']})"
        )
    waves = []
    for w in range(programs.waves):
        iterations = []
        for it in range(int(programs.wave_iters[w]), int(programs.wave_iters[w + 1])):
            rows = range(int(programs.iter_lanes[it]), int(programs.iter_lanes[it + 1]))
            iterations.append(
                [
                    (
                        int(programs.lane[e]),
                        int(programs.node_ptr[e, 0]) >> 4,
                        int(programs.lane_kind[e]),
                        int(programs.box_tests[e]),
                        int(programs.tri_tests[e]),
                    )
                    for e in rows
                ]
            )
        waves.append(WaveTrace(iterations, [], tag=w))

    class Run:  # what measure() reads of an RtRun
        refused = out.refused

    return {
        "run": Run,
        "cycles": out.cycles,
        "records": out.instructions,
        "lookups": out.lookups,
        "busy": out.busy,
        "accel_results": out.results,
        "traces": programs.traces,
        "cu_waves": waves,
        "accel_ii": ii,
        "accel_latency": latency,
        "rt": rt,
        "params": p,
        "warm": [int(line) for line in programs.lines],
        "sessions": {
            "player": {
                "results": out.results,
                "stack_checked": out.stack_checked,
                "mismatches": out.mismatches,
                "in_flight": out.in_flight,
                "driver_cpu_s": out.cpu_seconds,
            }
        },
        "programs": programs,
        "wall_s": time.monotonic() - started,
    }


def _kind(instr):
    ptr = instr["node_ptr"][0]
    return 0 if ptr & 0xF == 5 else 1 if ptr & 7 <= 3 else 2


_FIELDS = ("dual", "ray", "node_ptr", "pointer_flags", "desc")


def _payload(wave, instr):
    """The RT unit's instruction (its ``tag`` the wave slot) of a loop instruction; ``last`` is
    set on an instruction's final lane by :func:`gpurtl.golden.cu.rt_unit.run`."""
    return {"tag": wave, "last": 0, **{key: instr[key] for key in _FIELDS}}


def _zero_payload(params):
    from gpurtl.hdl.rt_unit import fetch_layout

    from ...core import layouts

    return layouts.unpack(fetch_layout(params["tag_bits"]), 0)


def _stack(session, requests):
    """The lanes' stack instructions through the ``ds_bvh_stack`` session: ``(new_stack_addr,
    dst)`` per lane, ``dst`` a pair for ``push8_pop2``."""
    rows = [
        dict(q, stack_addr=unpack_stack_addr(q["stack_addr"]), tri_size_opt=0) for q in requests
    ]
    session.send(rows)
    answers = []
    for q, a in zip(requests, session.receive()):
        if a["error"]:
            raise RtlLoopError(f"ds_bvh_stack refused a loop instruction: {q}")
        dst = (a["dst0"], a["dst1"]) if q["op"] == int(StackOp.PUSH8_POP2) else a["dst0"]
        answers.append((pack_stack_addr(a["stack_addr"]), dst))
    return answers


def utilization(box, pairs, tri, nodes, cycles):
    """The traversal experiment's three forms (percent of the RDNA 4 accelerator's peak): the
    article's formula (box tests / 8 + pair nodes), engine-cycle utilization (box tests / 8 +
    triangles / 2) and issue-slot occupancy (nodes taken a cycle)."""
    cycles = max(1, cycles)
    return {
        "article": 100 * (box / 8 + pairs) / cycles,
        "engine": 100 * (box / 8 + tri / 2) / cycles,
        "issue": 100 * nodes / cycles,
    }


def compare(result, exact=True):
    """The CU model on the same waves and configuration as the RTL run ``result`` of
    :func:`run_loop`, in its two timing modes: ``model``, the formulas of
    :func:`gpurtl.golden.cu.simulate` (the traversal experiment's default), and ``exact``, the
    RT unit mode (:func:`gpurtl.golden.cu.rt_unit.simulate_rt_unit`, the golden RT unit's own
    timing; ``exact=False`` leaves it out: ``None``). Side by side: totals, utilization, L0
    lookups; per instruction kind, the differences RTL - model of the completion cycles, the
    issue cycles and the latencies (completion - issue: what the instruction itself took,
    without the difference carried over from the instructions before it)."""
    from gpurtl.golden.cu.rt_unit import simulate_rt_unit

    waves, p = result["cu_waves"], result["params"]
    formula = simulate(waves, p, warm_lines=result["warm"])
    ii = result["accel_ii"]
    mode = None
    if exact:
        mode = simulate_rt_unit(
            waves,
            p,
            result["rt"],
            warm_lines=result["warm"],
            accel_groups=ii,
            accel_depth=result["accel_latency"] - ii,
        )
    steps = [step for w in waves for it in w.iterations for step in it]
    work = (
        sum(s[3] for s in steps),
        sum(1 for s in steps if s[2] == 1),
        sum(s[4] for s in steps),
        len(steps),
    )
    l0 = formula.memory["L0"]
    lookups = {"hit": l0["hits"], "pending_hit": l0["pending_hits"], "miss": l0["misses"]}
    return {
        "rtl": _side(result["cycles"], result["lookups"], work),
        "model": _side(formula.cycles, lookups, work),
        "exact": None if mode is None else _side(mode.cycles, mode.lookups, work),
        "instructions": len(result["records"]),
        "model_instructions": len(formula.instructions),
        "completion": _differences(result["records"], formula.instructions),
        "exact_completion": None
        if mode is None
        else _differences(result["records"], mode.instructions),
        "bvh_latency": {
            "rtl": _spread(_latencies(result["records"])),
            "model": _spread(_latencies(formula.instructions)),
        },
    }


def _side(cycles, lookups, work):
    box, pairs, tri, nodes = work
    return {"cycles": cycles, "lookups": lookups, **utilization(box, pairs, tri, nodes, cycles)}


def _latencies(records):
    return np.array([done - issue for _, kind, issue, done in records if kind == "bvh"], np.int64)


def _differences(records, model):
    """Per instruction kind: RTL - model of completion, issue and latency (``_spread`` each),
    the count and how many completions are equal; instructions matched by wave, kind and
    order."""
    theirs, seen = {}, {}
    for wave, kind, issue, done in model:
        n = seen.get((wave, kind), 0)
        theirs[(wave, kind, n)] = (issue, done)
        seen[(wave, kind)] = n + 1
    seen, diffs, kinds = {}, [], []
    for wave, kind, issue, done in records:
        n = seen.get((wave, kind), 0)
        seen[(wave, kind)] = n + 1
        other = theirs.get((wave, kind, n))
        if other is None:
            raise RtlLoopError(f"the CU model has no {kind} instruction {n} of wave {wave}")
        diffs.append((done - other[1], issue - other[0], (done - issue) - (other[1] - other[0])))
        kinds.append(kind)
    out = {}
    for kind in ("bvh", "ds"):
        d = np.array([x for x, k in zip(diffs, kinds) if k == kind], np.int64).reshape(-1, 3)
        out[kind] = _spread(d[:, 0])
        out[kind]["issue"] = _spread(d[:, 1])
        out[kind]["latency"] = _spread(d[:, 2])
        out[kind].update(count=len(d), equal=int((d[:, 0] == 0).sum()))
    return out


def _spread(values):
    """Max |x| (or max), median, mean, min and max of ``values``."""
    if not len(values):
        return {"max_abs": 0, "median": 0, "mean": 0.0, "min": 0, "max": 0}
    return {
        "max_abs": int(np.abs(values).max()),
        "median": float(np.median(values)),
        "mean": float(np.mean(values)),
        "min": int(values.min()),
        "max": int(values.max()),
    }


def measure(
    quick=False, progress=None, rtl=True, rtl_rays=None, rtl_backend="player", rtl_param=None
):
    """The ``--rtl`` run's data: the loop on the RTL over the packaged small bunny, checked
    against the golden traversal, and the CU model on the same configuration. ``rtl_param``:
    the ``--rtl-param`` texts (``NAME=VALUE``) that change the RT unit build."""
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal.loop import trace_wave
    from gpurtl.golden.traversal.rays import sphere_rays
    from gpurtl.golden.traversal.scene import build_scene

    rays = rtl_rays or RAYS[1 if quick else 0]
    changes = build_changes(rtl_param)
    rt = rt_unit_params(changes)
    bunny = M.bunny()
    scene = build_scene("bunny", bunny, "bvh8")
    origins, directions = sphere_rays(bunny, rays, seed=3)
    if progress:
        progress(0, 2, f"{rays} rays on the {rtl_backend} RTL, build {_build_text(changes)}")
    tell = (lambda line: progress(0, 2, line)) if progress else None
    player = rtl_backend == "player"
    if player:
        result = run_programs(scene, origins, directions, rt=rt, progress=tell)
    else:
        result = run_loop(scene, origins, directions, backend=rtl_backend, rt=rt, progress=tell)
    if progress:
        progress(1, 2, f"{result['cycles']} cycles on the RTL; the CU model")
    if player:
        # the traces are the golden loop's (the programs were recorded from it) and every RTL
        # output equalled its expected word: what is left to check is that every instruction
        # went through the RTL
        check = _played(result)
    else:
        golden = [
            trace_wave(scene, origins[k : k + 32], directions[k : k + 32])
            for k in range(0, rays, 32)
        ]
        check = check_against(result["traces"], golden)
    if check["differ"]:
        raise RtlLoopError(f"the loop on the RTL differs from the golden traversal: {check}")
    # the player's timing equals the RT unit mode's by test (tests/sim/backends/fast/
    # test_player.py): the command leaves out that run of the golden RT unit, the costly part
    cmp = compare(result, exact=not player)
    exact = cmp["exact_completion"]
    if exact is not None and any(d["equal"] != d["count"] for d in exact.values()):
        raise RtlLoopError(f"the RTL's timing differs from the CU model's RT unit mode: {exact}")
    if progress:
        progress(2, 2, "compared")
    return {
        "rtl_loop": True,
        "backend": rtl_backend,
        "rays": rays,
        "waves": -(-rays // 32),
        "rt_unit": rt,
        "changes": changes,
        "accel": {"ii": result["accel_ii"], "latency": result["accel_latency"]},
        "cu_params": result["params"].as_dict(),
        "check": check,
        "busy": result["busy"],
        "refused": result["run"].refused,
        "accel_busy": result["accel_results"] * result["accel_ii"],
        "sessions": result["sessions"],
        "comparison": cmp,
        "wall_s": result["wall_s"],
    }


#: The CU model's formulas (:func:`cu_params`) take of the build the L0 level's size, ways and
#: misses in flight, the wave slots and the accelerator's timing; the other parameters reach the
#: RT unit mode only (the formulas' L0 is the hierarchy's true-LRU cache, without a limit on
#: merged requests, a ray buffer or fill beats). Here, the values under which that is no loss.
_FORMULA_NEUTRAL = {"replacement": "lru", "beats": 1}


def _build_text(changes):
    """The ``--rtl-param`` options of a build (``default`` for none)."""
    return " ".join(f"--rtl-param {k}={v}" for k, v in changes.items()) or "default"


def _build_lines(data):
    """The report's description of the RT unit build and what the formulas take of it."""
    rt, changes = data["rt_unit"], data.get("changes", {})
    lines = [
        f"RT unit build ({_build_text(changes)}): L0 {rt['size']} B, {rt['ways']} ways, "
        f"{rt['replacement']} replacement, {rt['mshrs']} MSHRs x {rt['targets']} targets, "
        f"{rt['beats']} fill beat(s) a line, {1 << rt['id_bits']} ray buffer slots "
        f"(`id_bits` {rt['id_bits']}), `line_bits` {rt['line_bits']}; "
        f"{1 << rt['tag_bits']} waves; accelerator {rt['engines']} engine(s) x "
        f"{rt['boxes_per_engine']} box(es) (`fp` {rt['fp']}, triangles "
        f"{'on' if rt['triangles'] else 'off'}, transforms {'on' if rt['transforms'] else 'off'}, "
        f"ftz {'on' if rt['ftz'] else 'off'}): initiation interval {data['accel']['ii']}, "
        f"latency {data['accel']['latency']} cycles.",
    ]
    ignored = [f"{k}={rt[k]}" for k, v in _FORMULA_NEUTRAL.items() if rt[k] != v]
    ignored += [f"{k}={rt[k]}" for k in ("targets", "id_bits") if k in changes]
    if ignored:
        lines += [
            "",
            f"The CU model's formulas do not model {', '.join(ignored)} (their L0 is the "
            "memory hierarchy's true-LRU cache with the build's size, ways and MSHRs, no limit "
            "on merged requests, no ray buffer, whole-line fills): only the RT unit mode "
            "compares them.",
        ]
    return lines


def _played(result):
    """:func:`check_against`'s counts of a player run (:func:`run_programs`): the intersect
    results and stack responses that came out of the RTL (each equal to its expected word)
    against the golden loop's instruction counts; the closest hits are the golden loop's."""
    traces = result["traces"]
    played = result["sessions"]["player"]
    out = {"differ": 0}
    for name, rtl in (("steps", played["results"]), ("stack_ops", played["stack_checked"])):
        out[name] = [int(rtl), int(sum(int(t.counts[name].sum()) for t in traces))]
        out["differ"] += out[name][0] != out[name][1]
    for name in ("box_tests", "tri_tests"):
        total = int(sum(int(t.counts[name].sum()) for t in traces))
        out[name] = [total, total]
    out["hits"] = int(sum(int((t.prim >= 0).sum()) for t in traces))
    out["same_hits_waves"] = [len(traces), len(traces)]
    return out


def check_against(traces, golden):
    """The RTL loop's per-wave traces against the golden loop's: closest hits (primitive and
    distance) and instruction counts."""
    out = {"differ": 0}
    for name in ("steps", "stack_ops", "box_tests", "tri_tests"):
        out[name] = [
            int(sum(int(t.counts[name].sum()) for t in traces)),
            int(sum(int(t.counts[name].sum()) for t in golden)),
        ]
        out["differ"] += out[name][0] != out[name][1]
    same = [
        bool((a.prim == b.prim).all() and np.array_equal(a.t, b.t))
        for a, b in zip(traces, golden, strict=True)
    ]
    out["hits"] = int(sum(int((t.prim >= 0).sum()) for t in traces))
    out["same_hits_waves"] = [int(sum(same)), len(same)]
    out["differ"] += not all(same)
    return out


class _NotRun:
    """A comparison side that was not run: every field reads ``not run``."""

    def __getitem__(self, key):
        return self

    def __format__(self, spec):
        return "not run"


def _rate(lookups):
    if isinstance(lookups, _NotRun):
        return None
    total = sum(lookups.values())
    return {k: 100 * v / total if total else 0.0 for k, v in lookups.items()}


def report(data, out_dir):
    """``summary.md`` of the ``--rtl`` run and the report rows."""
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "traversal_rtl.json").write_text(json.dumps(data))
    c = data["comparison"]
    rtl, model, exact = c["rtl"], c["model"], c["exact"]
    if exact is None:  # the player's command leaves the RT unit mode to its tests
        exact = _NotRun()
    ck = data["check"]
    lines = [
        "# The traversal loop on the RTL",
        "",
        f"{data['rays']} rays ({data['waves']} waves) of the packaged small bunny, BVH8; every "
        f"intersect instruction through the `rt_unit` RTL and every stack instruction through "
        f"`ds_bvh_stack` ({data['backend']}), each output checked against the golden models: "
        f"0 mismatches.",
        "",
        *_build_lines(data),
        "",
        f"Against the golden traversal: {ck['steps'][0]} intersect instructions (golden "
        f"{ck['steps'][1]}), {ck['stack_ops'][0]} stack instructions (golden "
        f"{ck['stack_ops'][1]}), closest hits equal in {ck['same_hits_waves'][0]} of "
        f"{ck['same_hits_waves'][1]} waves ({ck['hits']} rays hit).",
        "",
        "CU model, same waves and configuration: *formulas* is `golden.cu.simulate` (the "
        "traversal experiment's timing), *RT unit mode* is `golden.cu.rt_unit` (the golden RT "
        "unit's own timing). Utilization over the whole run.",
        "",
        "| | RTL | CU model, RT unit mode | CU model, formulas |",
        "|---|---|---|---|",
        f"| cycles | {rtl['cycles']} | {exact['cycles']} | {model['cycles']} |",
    ]
    for key, label in (
        ("article", "article formula %"),
        ("engine", "engine-cycle %"),
        ("issue", "issue-slot %"),
    ):
        lines.append(f"| {label} | {rtl[key]:.2f} | {exact[key]:.2f} | {model[key]:.2f} |")
    rates = [_rate(side["lookups"]) for side in (rtl, exact, model)]
    for key in ("hit", "pending_hit", "miss"):
        cells = " | ".join(
            f"{side['lookups'][key]} ({r[key]:.1f}%)" if r else "not run"
            for side, r in zip((rtl, exact, model), rates)
        )
        lines.append(f"| L0 {key.replace('_', ' ')} | {cells} |")
    lines += [
        f"| RT unit busy cycles (some bvhcnt > 0) | {data['busy']} | | |",
        f"| accelerator busy cycles (results x II) | {data['accel_busy']} | | |",
        f"| cycles a lane was refused: its wave's bvhcnt at 7 (an instruction's first lane) / "
        f"other (ray buffer, L0) | "
        f"{data['refused']['full']} / {data['refused']['other']} | | |",
        "",
        "Per instruction, RTL minus CU model (cycles): the completion cycle, and the latency "
        "(completion - issue, without what earlier instructions carried over):",
        "",
        "| mode | instructions | count | completion equal | completion max abs | median | "
        "min / max | latency max abs | latency median | latency min / max |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, table in (("RT unit mode", "exact_completion"), ("formulas", "completion")):
        for kind, d in (c[table] or {}).items():
            lat = d["latency"]
            lines.append(
                f"| {mode} | {kind} | {d['count']} | {d['equal']} | {d['max_abs']} | "
                f"{d['median']:.0f} | {d['min']} / {d['max']} | {lat['max_abs']} | "
                f"{lat['median']:.0f} | {lat['min']} / {lat['max']} |"
            )
    lat = c["bvh_latency"]
    lines += [
        "",
        f"Intersect instruction latency (issue to last result): RTL median "
        f"{lat['rtl']['median']:.0f}, max {lat['rtl']['max']}; CU model (formulas) median "
        f"{lat['model']['median']:.0f}, max {lat['model']['max']}.",
        "",
        f"Run: {data['wall_s']:.0f} s wall on the RTL.",
    ]
    rr, mr = rates[0], rates[2]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    bvh = c["completion"]["bvh"]
    rows = [
        ("RT unit build", _build_text(data.get("changes", {}))),
        (
            "instructions through the RTL (intersect / stack)",
            f"{ck['steps'][0]} / {ck['stack_ops'][0]}",
        ),
        ("golden-model mismatches", 0),
        (
            "cycles RTL / CU model RT unit mode / formulas",
            f"{rtl['cycles']} / {exact['cycles']} / {model['cycles']}",
        ),
        (
            "instructions equal to the RT unit mode, cycle for cycle",
            f"{sum(d['equal'] for d in c['exact_completion'].values())} of {c['instructions']}"
            if c["exact_completion"] is not None
            else "not run (the player's equality is tests/sim/backends/fast/test_player.py's)",
        ),
        (
            "utilization RTL: article / engine / issue %",
            f"{rtl['article']:.2f} / {rtl['engine']:.2f} / {rtl['issue']:.2f}",
        ),
        (
            "utilization CU model: article / engine / issue %",
            f"{model['article']:.2f} / {model['engine']:.2f} / {model['issue']:.2f}",
        ),
        (
            "L0 hit / pending / miss % RTL (CU model)",
            " / ".join(f"{rr[k]:.1f} ({mr[k]:.1f})" for k in ("hit", "pending_hit", "miss")),
        ),
        (
            "intersect RTL - CU model formulas: completion max abs, median; latency max abs, "
            "median",
            f"{bvh['max_abs']}, {bvh['median']:.0f}; {bvh['latency']['max_abs']}, "
            f"{bvh['latency']['median']:.0f}",
        ),
    ]
    return {
        "title": "Traversal loop on the RTL (rt_unit + ds_bvh_stack) against the CU model",
        "rows": rows,
        "files": [str(summary), str(out_dir / "traversal_rtl.json")],
    }
