"""The CU model's timing mode with the RT unit's exact timing: intersect instructions go through
the cycle-stepped golden model of the RT unit (:class:`gpurtl.golden.rt_unit.RtUnitModel`: node
fetch through its L0, the ray accelerator, per-wave ``bvhcnt``) instead of the formulas of
:func:`~gpurtl.golden.cu.simulate` (an L0 level of the hierarchy, a texture slot a lane, the
accelerator's slot and latency).

The clock runs every cycle. Rules of the shader side, as :func:`~gpurtl.golden.cu.simulate`'s:
set-up VALU (``setup_cycles``); per iteration the VALU work of every branch a lane takes
(``box_valu``, ``pair_valu``, ``instance_valu``); the SIMD of wave slot ``s`` is ``s % simds``
(one wave's VALU work at a time); one memory instruction issued a cycle for the CU (the lowest
ready slot first); the LDS stack unit takes one lane a cycle and answers ``lds_latency`` cycles
after the last; ``shade_valu`` at the end (no attribute loads, static VGPRs: every slot runs).
The RT unit side:

* an intersect instruction's lanes queue for the RT unit's ``inst`` stream in issue order, one
  offered a cycle (the texture address path), each held until taken, the last with ``last``
  set (the RT unit counts the wave instruction once on ``bvhcnt``);
* the instruction is complete in the cycle its wave's last result leaves the RT unit (``out`` is
  always ready); the wave goes on when the RT unit's ``bvhcnt`` of its slot reads 0;
* the memory behind the L0 (:class:`HierarchyPort`) answers a line request when the hierarchy of
  the levels below L0 (``params.levels[1:]``) says the line is back, one fill offered at a time.

:func:`run` takes the RT unit and the waves as objects, so the same rules drive the RTL (a
co-simulation session, the waves' programs taking their decisions from its results) and this
model; :func:`simulate_rt_unit` runs it on :class:`~gpurtl.golden.cu.WaveTrace` waves.
"""

import math

from gpurtl.facts.rt_unit import L0Geometry
from gpurtl.facts.waitcnt import profile
from gpurtl.golden.memory import Hierarchy
from gpurtl.golden.rt_unit import RtUnitModel

__all__ = ["HierarchyPort", "RtRun", "TraceSource", "run", "simulate_rt_unit"]

#: node pointer type of a box node, a triangle pair, an instance
_KIND_PTR = {0: 5, 1: 0, 2: 6}
#: the RT unit refuses a wave's instruction at this ``bvhcnt`` (the GFX12 counter's maximum)
_BVHCNT_MAX = profile("gfx12").max("bvh")


class HierarchyPort:
    """The memory on the L0's ``mem_req`` and ``fill`` streams: a request taken in cycle ``c``
    is answered from the cycle :class:`~gpurtl.golden.memory.Hierarchy` of ``levels`` says
    (rounded up); answers due are offered in the order they fall due (the earliest, then the
    lowest line), each held until taken. ``make_line(line)`` gives a line's 1024-bit data. A
    line goes out as ``beats`` transfers of ``1024 / beats`` bits (the L0's ``beats``), low bits
    first, back to back: each beat held until taken, the next offered in the cycle after."""

    def __init__(self, levels, make_line=None, warm=(), beats=1):
        self.hierarchy = Hierarchy(levels)
        self.hierarchy.warm(list(warm), {lv.name for lv in levels})
        self.make_line = make_line or (lambda line: 0)
        self.beats, self.beat = beats, 0
        self.due = []  # [cycle due, line]
        self.offer = None

    def inputs(self, cycle):
        """This cycle's ``mem_req`` and ``fill`` inputs."""
        if self.offer is None:
            ready = [entry for entry in self.due if entry[0] <= cycle]
            if ready:
                entry = min(ready)
                self.due.remove(entry)
                self.offer = entry[1]
        fill = {"valid": 0, "payload": {"line": 0, "data": 0}}
        if self.offer is not None:
            width = 1024 // self.beats
            data = (self.make_line(self.offer) >> (self.beat * width)) & ((1 << width) - 1)
            fill = {"valid": 1, "payload": {"line": self.offer, "data": data}}
        return {"ready": 1}, fill

    def outputs(self, cycle, inputs, outputs):
        """Take note of this cycle's transfers."""
        if outputs["mem_req"]["valid"]:
            line = outputs["mem_req"]["payload"]["line"]
            self.due.append([math.ceil(self.hierarchy.access(line, cycle)), line])
        if inputs["fill"]["valid"] and outputs["fill"]["ready"]:
            self.beat = (self.beat + 1) % self.beats
            if self.beat == 0:
                self.offer = None


class TraceSource:
    """A wave of a :class:`~gpurtl.golden.cu.WaveTrace` as :func:`run` asks for it: each
    iteration's lanes become RT unit instructions of the lane's node line and kind (no ray: the
    RT unit's timing does not depend on the data)."""

    def __init__(self, trace, idle):
        self.trace, self.idle, self.step = trace, idle, 0

    def start(self, slot):
        self.slot = slot
        return self._message()

    def _message(self):
        if self.step == len(self.trace.iterations):
            return None
        lanes = self.trace.iterations[self.step]
        payloads = []
        for _lane, line, kind, _box, _tri in lanes:
            payload = dict(self.idle, tag=self.slot)
            payload["node_ptr"] = [(line << 4) | _KIND_PTR[kind], 0]
            payloads.append(payload)
        return [kind for _, _, kind, _, _ in lanes], payloads

    def results(self, results):
        """The intersect results are in; the stack instruction's lane count."""
        return len(results)

    def stacked(self):
        """The stack answers are in; the next iteration's message (``None``: the wave is done)."""
        self.step += 1
        return self._message()


class RtRun:
    """What :func:`run` measured: ``instructions`` ``(wave, kind, issue, complete)`` (kind
    ``bvh`` or ``ds``), ``cycles``, L0 ``lookups`` (hit, pending hit, miss: the RT unit's
    ``event`` output), ``busy`` (cycles with some ``bvhcnt`` above 0), ``results`` (results
    that left the RT unit), ``refused`` (cycles a lane offered was not taken: ``full``, the
    first lane of an instruction of a wave whose ``bvhcnt`` is at the maximum, or ``other``: no
    ray buffer slot, the L0 busy)."""

    def __init__(self):
        self.instructions, self.cycles = [], 0
        self.lookups = {"hit": 0, "pending_hit": 0, "miss": 0}
        self.busy = self.results = 0
        self.refused = {"full": 0, "other": 0}


class _Wave:
    def __init__(self, index, source):
        self.index, self.source = index, source
        self.state, self.ready = "valu", 0
        self.message = None  # (kinds, payloads) of the current iteration
        self.count = 0  # lanes of the intersect instruction in flight
        self.got = []  # its results so far
        self.record = None


def run(sources, params, unit, memory, *, slots, idle, max_cycles=10**8):
    """Run ``sources`` (objects with ``start(slot)``, ``results(list)``, ``stacked()``, see
    :class:`TraceSource`), launched in order on ``slots`` wave slots, on the RT unit ``unit``
    (``step(inputs) -> outputs`` in the ``rt_unit`` block's dictionary form) with ``memory``
    (:class:`HierarchyPort`) behind its L0; ``idle``: the idle ``inst`` payload. An
    :class:`RtRun`."""
    p = params
    out_run = RtRun()
    pending = list(enumerate(sources))[::-1]
    waves = [None] * slots
    simd_free = [0] * p.simds
    lds_next = 0
    fifo = []  # (slot, payload, first lane) waiting for the RT unit
    names = ("hit", "pending_hit", "miss")
    no_wait = {"valid": 0, "wave": 0, "word": 0}

    def valu(slot, start, cost):
        simd = slot % p.simds
        begin = max(start, simd_free[simd])
        simd_free[simd] = begin + cost
        return begin + cost

    def launch(slot, at):
        index, source = pending.pop()
        wave = _Wave(index, source)
        wave.message = source.start(slot)
        wave.ready = valu(slot, at, p.setup_cycles)
        waves[slot] = wave

    for slot in range(slots):
        if pending:
            launch(slot, 0)
    cycle = 0
    while any(w is not None for w in waves) or fifo:
        if cycle >= max_cycles:
            raise RuntimeError(f"the waves did not end within {max_cycles} cycles")
        issued = False
        for slot in range(slots):
            wave = waves[slot]
            if wave is None or wave.ready > cycle:
                continue
            if wave.state == "next":  # the stack answers are in: the next iteration
                wave.message, wave.state = wave.source.stacked(), "valu"
            if wave.state == "valu":
                if wave.message is None:
                    wave.ready, wave.state = valu(slot, cycle, p.shade_valu), "end"
                    continue
                taken = set(wave.message[0])
                cost = (
                    p.box_valu * (0 in taken)
                    + p.pair_valu * (1 in taken)
                    + p.instance_valu * (2 in taken)
                )
                wave.ready, wave.state = valu(slot, cycle, cost), "bvh"
            elif wave.state in ("bvh", "ds") and not issued:
                issued = True
                if wave.state == "bvh":
                    payloads = wave.message[1]
                    last = len(payloads) - 1
                    fifo.extend(
                        (slot, dict(payload, last=int(k == last)), k == 0)
                        for k, payload in enumerate(payloads)
                    )
                    wave.count, wave.got = len(payloads), []
                    wave.record = [wave.index, "bvh", cycle, None]
                    wave.state, wave.ready = "wait_bvh", cycle + 1
                else:
                    start = max(cycle + 1, lds_next)
                    lds_next = start + wave.count
                    done = lds_next - 1 + p.lds_latency
                    out_run.instructions.append((wave.index, "ds", cycle, done))
                    wave.state, wave.ready = "next", done + 1
            elif wave.state == "end":
                waves[slot] = None
                if pending:
                    launch(slot, cycle + 1)
        head = fifo[0] if fifo else None
        mem_req, fill = memory.inputs(cycle)
        inputs = {
            "inst": {"valid": 1, "payload": head[1]} if head else {"valid": 0, "payload": idle},
            "out": {"ready": 1},
            "mem_req": mem_req,
            "fill": fill,
            "wait": no_wait,
        }
        out = unit.step(inputs)
        memory.outputs(cycle, inputs, out)
        counts = out["bvh"]["bvhcnt"]
        if head is not None and out["inst"]["ready"]:
            fifo.pop(0)
        elif head is not None:
            full = head[2] and counts[head[0]] == _BVHCNT_MAX
            out_run.refused["full" if full else "other"] += 1
        if out["event"]["valid"]:
            out_run.lookups[names[out["event"]["kind"]]] += 1
        out_run.busy += any(counts)
        if out["out"]["valid"]:
            out_run.results += 1
            wave = waves[out["out"]["payload"]["wave"]]
            if wave is None or wave.state != "wait_bvh":
                raise RuntimeError(f"cycle {cycle}: an RT unit result for no waiting wave")
            wave.got.append(out["out"]["payload"]["result"])
            if len(wave.got) == wave.count:
                wave.record[3] = cycle
        for slot in range(slots):
            wave = waves[slot]
            if wave is None or wave.state != "wait_bvh" or wave.record[3] is None:
                continue
            if wave.record[3] < cycle and counts[slot] == 0:
                out_run.instructions.append(tuple(wave.record))
                wave.count = wave.source.results(wave.got)
                wave.state, wave.ready = "ds", cycle + 1
        cycle += 1
    out_run.cycles = cycle
    return out_run


def simulate_rt_unit(waves, params, rt, *, warm_lines=(), accel_groups, accel_depth):
    """:func:`run` of :class:`~gpurtl.golden.cu.WaveTrace` waves on the golden RT unit of the
    ``rt_unit`` parameters ``rt`` (the L0 geometry, all of
    :class:`~gpurtl.facts.rt_unit.L0Geometry`'s fields: replacement and fill beats too;
    ``tag_bits``: the wave slots) and the accelerator timing ``accel_groups`` (initiation
    interval) and ``accel_depth`` (latency - initiation interval); the levels below L0 are
    ``params.levels[1:]``, ``warm_lines`` present in all of them at the start. An
    :class:`RtRun`."""
    names = (*L0Geometry.names(), "tag_bits")
    unit = RtUnitModel(
        **{k: rt[k] for k in names if k in rt},
        accel_groups=accel_groups,
        accel_depth=accel_depth,
        ftz=rt.get("ftz", False),
    )
    memory = HierarchyPort(params.levels[1:], warm=warm_lines, beats=rt.get("beats", 1))
    idle = _idle_payload(rt["tag_bits"])
    sources = [TraceSource(w, idle) for w in waves]
    return run(sources, params, unit, memory, slots=1 << rt["tag_bits"], idle=idle)


def _idle_payload(tag_bits):
    """An all-zero ``rt_unit`` instruction."""
    zero3 = [0, 0, 0]
    desc = {
        "sort_en": 0,
        "heuristic": 0,
        "sort_tri_first": 0,
        "box_grow": 0,
        "wide_sort": 0,
        "return_mode": 0,
        "compressed": 0,
        "box_node_64b": 0,
        "instance_en": 0,
        "pointer_flags_en": 0,
    }
    return {
        "tag": 0,
        "last": 0,
        "dual": 0,
        "ray": {"origin": zero3, "dir": list(zero3), "extent": 0, "instance_mask": 0},
        "node_ptr": [0, 0],
        "pointer_flags": 0,
        "desc": desc,
    }
