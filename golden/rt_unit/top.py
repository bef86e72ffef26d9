"""Cycle-stepped golden model of the RT unit top (:mod:`gpurtl.hdl.rt_unit.top`).

The RT unit is three blocks with golden models of their own, joined by the rules below:

* :class:`~.node_fetch.NodeFetchModel` with ``order="wave"`` (the instruction's ``tag`` is its
  wave: each wave's instructions reach the accelerator in the order they came);
* the ray accelerator (:class:`AccelTiming` around the scalar
  :class:`~gpurtl.golden.ray_accel.scalar.intersect.IntersectModel`): it takes an instruction
  when its global enable ``en = ~o.valid | o.ready`` is high and its entry register is free or
  on its last slot group (every ``groups`` enabled cycles at most); the result leaves ``groups +
  depth`` enabled cycles after it was taken;
* the wait counters (:class:`~gpurtl.golden.waitcnt.WaitCountersModel`, GFX12, ``2 ** tag_bits``
  waves, full policy ``stall``) count wave instructions. The ``inst`` stream carries one lane a
  transfer; a wave instruction is a wave's lanes up to the one with ``last`` set (lanes of
  other waves may come in between). The first lane taken of a wave instruction is a ``BVH``
  issue of its wave (the count is visible from the next cycle); the result of its ``last``
  lane taken is a ``bvh`` return (results are in order within a wave, so that is the
  instruction's completion). The ``wait`` input takes the raw ``s_wait_*`` word. The first lane
  of an instruction of a wave whose ``bvhcnt`` is at its maximum (7) is refused; later lanes
  of an instruction are not refused for the count.

The output ``out`` is ``{wave, last, result}`` (``result`` as ``OUT_LAYOUT``, ``last`` the
lane's instruction's), all zero while ``out.valid`` is low; ``bvh`` gives every wave's
``stall`` bit and ``bvhcnt``.

:meth:`RtUnitModel.columns` runs the same rules over many cycles at once (the compiled
backend's check of a recorded trace): the node fetch, the L0 and the accelerator's timing step
per cycle on references (a lane is the cycle it came in, a line's data the cycles of its fill
beats), the wait counters run on columns (:meth:`WaitCountersModel.columns`) and the
intersections in one batch (:func:`~gpurtl.golden.ray_accel.vector.batch.intersect_words`,
bit-identical to the scalar model) after the loop. It equals :meth:`RtUnitModel.step` cycle by
cycle.
"""

import numpy as np
from amaranth.lib import data

from gpurtl.facts.ray_accel import INSTR_LAYOUT, OUT_LAYOUT
from gpurtl.facts.rt_unit import WAVE_TAG_BITS
from gpurtl.facts.waitcnt import InstClass
from gpurtl.golden.ray_accel.scalar.intersect import IntersectModel
from gpurtl.golden.ray_accel.vector.batch import intersect_words
from gpurtl.golden.ray_accel.vector.bitfields import FieldWriter, field_span, read_fields
from gpurtl.golden.waitcnt import WaitCountersModel

from .node_fetch import NodeFetchModel

__all__ = ["AccelTiming", "RtUnitModel"]

_ZERO_RESULT = {"dw": [0] * 10, "origin": [0] * 3, "dir": [0] * 3, "status": 0}


class AccelTiming:
    """Cycle timing of the ray accelerator around its transaction model ``model``.

    Parameters
    ----------
    model : callable
        Instruction dictionary to result dictionary.
    groups : int
        Enabled cycles an instruction holds the entry register (the initiation interval).
    depth : int
        Enabled cycles from the last slot group to the output (``latency - groups``).
    """

    def __init__(self, model, groups, depth):
        if groups < 1 or depth < 1:
            raise ValueError(f"`groups` and `depth` must be positive, not {groups}, {depth}")
        self.model, self.groups = model, groups
        self.s1 = None  # (instruction, side) in the entry register
        self.phase = 0
        self.line = [None] * depth  # (result, side) per enabled cycle, the newest first

    @property
    def out(self):
        """``(result, side)`` on the output, or ``None``."""
        return self.line[-1]

    def step(self, offer, o_ready):
        """One clock; ``offer`` is ``(instruction, side)`` or ``None``. Returns whether the
        accelerator took it (``i.ready``, which does not depend on the offer)."""
        en = self.line[-1] is None or bool(o_ready)
        last = self.phase == self.groups - 1
        take = en and (self.s1 is None or last)
        if en:
            done = None
            if self.s1 is not None and last:
                done = (self.model(self.s1[0]), self.s1[1])
            self.line = [done] + self.line[:-1]
        if take:
            self.s1, self.phase = offer, 0
        elif en:
            self.phase += 1
        return take


class RtUnitModel:
    """Golden model of :class:`gpurtl.hdl.rt_unit.RtUnit`.

    Parameters
    ----------
    geometry : L0Geometry, optional
        The L0's (:class:`gpurtl.facts.rt_unit.L0Geometry`); ``**fields`` replace its fields.
    tag_bits : int
        ``2 ** tag_bits`` waves.
    accel_groups, accel_depth : int
        The ray accelerator build's timing (see :class:`AccelTiming`).
    ftz : bool
    paths : frozenset
        The node kinds the accelerator build has (others give status 1).
    dual : bool
        The node fetch fetches the dual form's two nodes (:class:`~.node_fetch.NodeFetchModel`).
    """

    def __init__(
        self,
        geometry=None,
        tag_bits=WAVE_TAG_BITS,
        *,
        accel_groups,
        accel_depth,
        ftz=False,
        paths=None,
        dual=False,
        **fields,
    ):
        self.fetch = NodeFetchModel(geometry, tag_bits, "wave", dual, **fields)
        self.accel = AccelTiming(IntersectModel(ftz=ftz, paths=paths), accel_groups, accel_depth)
        self.counters = WaitCountersModel("gfx12", 1 << tag_bits, "stall")
        self.waves = 1 << tag_bits
        self.open = [False] * self.waves  # lanes of the wave's instruction taken, its last not
        self._max = self.counters.prof.max("bvh")
        self._build = (geometry, tag_bits, fields, accel_groups, accel_depth)
        self.ftz, self.paths = ftz, paths
        self._mode = None  # "step" or "columns": the two keep their state in different forms

    def _enter(self, mode):
        if self._mode is None:
            self._mode = mode
            if mode == "columns":
                geometry, tag_bits, fields, groups, depth = self._build
                self.fetch = _FetchRefs(geometry, tag_bits, "wave", **fields)
                self.accel = AccelTiming(_Jobs(), groups, depth)
                self._store = _TraceStore(self.fetch.l0.geometry.beats)
                self._bvh = [0] * self.waves  # the loop's running bvhcnt of every wave
        elif self._mode != mode:
            raise ValueError(
                f"this model ran `{self._mode}` before: one instance runs either `step` or "
                "`columns`"
            )

    def step(self, inputs):
        self._enter("step")
        inst, out_ready = inputs["inst"], bool(inputs["out"]["ready"])
        wave, last = inst["payload"]["tag"], bool(inst["payload"]["last"])
        first = not self.open[wave]
        full = first and self.counters.cnt[wave]["bvh"] == self._max

        leaving = self.accel.out
        # The accelerator's i.ready first: it does not depend on what the node fetch offers.
        en = leaving is None or out_ready
        accel_ready = en and (self.accel.s1 is None or self.accel.phase == self.accel.groups - 1)
        fetch_out = self.fetch.step(
            {
                "inst": {
                    "valid": int(bool(inst["valid"]) and not full),
                    "payload": inst["payload"],
                },
                "out": {"ready": int(accel_ready)},
                "mem_req": inputs["mem_req"],
                "fill": inputs["fill"],
            }
        )
        offer = None
        if fetch_out["out"]["valid"]:
            payload = fetch_out["out"]["payload"]
            offer = (payload["instr"], (payload["tag"], payload["last"]))
        self.accel.step(offer, out_ready)

        ready = bool(fetch_out["inst"]["ready"]) and not full
        take = bool(inst["valid"]) and ready
        if take:
            self.open[wave] = not last
        side = leaving[1] if leaving is not None else (0, 0)
        returned = leaving is not None and out_ready and bool(side[1])
        ret = {name: {"valid": 0, "wave": 0} for name in self.counters.prof.counters}
        ret["bvh"] = {"valid": int(returned), "wave": side[0]}
        counter_out = self.counters.step(
            {
                "issue": {
                    "valid": int(take and first),
                    "wave": wave,
                    "cls": InstClass.BVH.value,
                },
                "wait": inputs["wait"],
                "ret": ret,
            }
        )
        result = leaving[0] if leaving is not None else _ZERO_RESULT
        return {
            "inst": {"ready": int(ready)},
            "out": {
                "valid": int(leaving is not None),
                "payload": {"wave": side[0], "last": side[1], "result": result},
            },
            "mem_req": fetch_out["mem_req"],
            "fill": fetch_out["fill"],
            "bvh": {
                "stall": counter_out["stall"],
                "bvhcnt": [c["bvh"] for c in counter_out["cnt"]],
            },
            "err": {
                "unexpected_fill": fetch_out["err"]["unexpected_fill"],
                "dual": fetch_out["err"]["dual"],
                "bad_wait": counter_out["err"]["bad_wait"],
            },
            "event": fetch_out["event"],
        }

    def columns(self, inputs):
        """Many clocks at once: the outputs of :meth:`step` cycle by cycle, as columns.

        Parameters
        ----------
        inputs : dict
            One sequence of per-cycle values for each input field, keyed by its dotted path in
            the block's input layout (``"inst.valid"``, ``"inst.payload.ray.origin[0]"``...);
            ``"fill.payload.data"``, wider than 64 bits, is a ``(cycles, words)`` uint32 array
            (each row the beat's bits, word 0 the lowest).

        Returns
        -------
        dict
            One integer array for each output field, keyed by its dotted path. The state carries
            over between calls (a lane taken in one call may leave in the next); an instance that
            ran :meth:`step` cannot run ``columns``, nor the other way round. Every line filled
            stays referenced (its 128 bytes kept) while it may sit in the L0.
        """
        self._enter("columns")
        store = self._store

        def column(path):
            return np.asarray(inputs[path]).tolist()

        cycles = len(inputs["inst.valid"])
        base = store.cycles
        store.add(inputs, cycles)
        i_valid, tag, last_of = (
            column("inst.valid"),
            column("inst.payload.tag"),
            column("inst.payload.last"),
        )
        dual, ptr = column("inst.payload.dual"), column("inst.payload.node_ptr[0]")
        o_ready, m_ready = column("out.ready"), column("mem_req.ready")
        f_valid, f_line = column("fill.valid"), column("fill.payload.line")
        fetch, accel, counts, open_ = self.fetch, self.accel, self._bvh, self.open
        top = self._max
        names = ("inst.ready", "out.valid", "out.payload.wave", "out.payload.last", "job")
        names += ("mem_req.valid", "mem_req.payload.line", "fill.ready", "unexpected", "dual")
        names += ("event.valid", "event.kind", "issue", "ret.valid", "ret.wave", "seen")
        out = {name: [0] * cycles for name in names}
        (inst_ready, out_valid, out_wave, out_last, job, mem_valid, mem_line, fill_ready,
         unexpected, err_dual, ev_valid, ev_kind, issue, ret_valid, ret_wave, seen) = (
            out[name] for name in names
        )  # fmt: skip
        taken = []
        for t in range(cycles):
            ref = base + t + 1  # this cycle's lane and fill beat (0: none)
            wave, last = tag[t], last_of[t]
            first = not open_[wave]
            seen[t] = counts[wave]
            full = first and counts[wave] == top
            leaving = accel.line[-1]
            ready_out = o_ready[t]
            en = leaving is None or ready_out
            accel_ready = en and (accel.s1 is None or accel.phase == accel.groups - 1)
            f = fetch.step(
                {
                    "inst": {
                        "valid": int(bool(i_valid[t]) and not full),
                        "payload": {"tag": wave, "last": last, "dual": dual[t], "node_ptr": (ptr[t],),
                                    "row": ref},
                    },
                    "out": {"ready": int(accel_ready)},
                    "mem_req": {"ready": m_ready[t]},
                    "fill": {"valid": f_valid[t], "payload": {"line": f_line[t], "data": ref}},
                }
            )  # fmt: skip
            offer = None
            fetched = f["out"]
            if fetched["valid"]:
                payload = fetched["payload"]
                offer = (payload["instr"], (payload["tag"], payload["last"]))
            accel.step(offer, ready_out)
            ready = bool(f["inst"]["ready"]) and not full
            take = bool(i_valid[t]) and ready
            if take:
                open_[wave] = not last
                taken.append(t)
            inst_ready[t] = int(ready)
            if leaving is not None:
                (index, (side_wave, side_last)) = leaving
                out_valid[t], out_wave[t], out_last[t], job[t] = 1, side_wave, side_last, index + 1
                if ready_out and side_last:
                    ret_valid[t], ret_wave[t] = 1, side_wave
                    if counts[side_wave]:
                        counts[side_wave] -= 1
            if take and first:
                issue[t] = 1
                counts[wave] += 1
            mem_valid[t], mem_line[t] = f["mem_req"]["valid"], f["mem_req"]["payload"]["line"]
            fill_ready[t], unexpected[t] = f["fill"]["ready"], f["err"]["unexpected_fill"]
            err_dual[t], ev_valid[t], ev_kind[t] = (
                f["err"]["dual"],
                f["event"]["valid"],
                f["event"]["kind"],
            )
        store.keep_lanes(taken, base)
        store.cycles += cycles
        return self._finish(inputs, out, cycles)

    def _finish(self, inputs, out, cycles):
        """The output columns of one :meth:`columns` call from the loop's records."""
        counters = self.counters
        tag = np.asarray(inputs["inst.payload.tag"])
        zeros = np.zeros(cycles, dtype=np.int64)
        counter_in = {
            "issue.valid": np.asarray(out["issue"]),
            "issue.wave": tag,
            "issue.cls": np.full(cycles, InstClass.BVH.value),
            "wait.valid": inputs["wait.valid"],
            "wait.wave": inputs["wait.wave"],
            "wait.word": inputs["wait.word"],
        }
        for name in counters.prof.counters:
            counter_in[f"ret.{name}.valid"] = (
                np.asarray(out["ret.valid"]) if name == "bvh" else zeros
            )
            counter_in[f"ret.{name}.wave"] = np.asarray(out["ret.wave"]) if name == "bvh" else zeros
        counted = counters.columns(counter_in)
        bvhcnt = np.stack([counted[f"cnt[{w}].bvh"] for w in range(self.waves)])
        if cycles and not np.array_equal(
            bvhcnt[tag.astype(np.int64), np.arange(cycles)], np.asarray(out["seen"])
        ):
            raise AssertionError("the column loop's bvhcnt left the wait counters' model")
        columns = {
            "inst.ready": out["inst.ready"],
            "out.valid": out["out.valid"],
            "out.payload.wave": out["out.payload.wave"],
            "out.payload.last": out["out.payload.last"],
            "mem_req.valid": out["mem_req.valid"],
            "mem_req.payload.line": out["mem_req.payload.line"],
            "fill.ready": out["fill.ready"],
            "bvh.stall": counted["stall"],
            "err.unexpected_fill": out["unexpected"],
            "err.dual": out["dual"],
            "err.bad_wait": counted["err.bad_wait"],
            "event.valid": out["event.valid"],
            "event.kind": out["event.kind"],
        }
        for w in range(self.waves):
            columns[f"bvh.bvhcnt[{w}]"] = bvhcnt[w]
        columns = {name: np.asarray(value, dtype=np.int64) for name, value in columns.items()}
        columns.update(self._results(np.asarray(out["job"], dtype=np.int64)))
        return columns

    def _results(self, job):
        """The ``out.payload.result`` columns: job ``job[t] - 1`` (0: none) of every cycle, the
        new jobs intersected in one batch."""
        jobs, store = self.accel.model, self._store
        new = jobs.pending
        if new:
            words = store.instructions(new)
            results = intersect_words(words, ftz=self.ftz, paths=self.paths)
            for (index, _), row in zip(new, results):
                jobs.results[index] = row
            jobs.pending = []
        rows = np.zeros((len(job), len(_OUT_WORDS_ZERO)), dtype=np.uint32)
        present = np.flatnonzero(job)
        if len(present):
            rows[present] = np.stack([jobs.results[int(k) - 1] for k in job[present]])
        # jobs still in the accelerator's line may leave in a later call; older ones are done
        alive = [entry[0] for entry in self.accel.line if entry is not None]
        jobs.results = {k: v for k, v in jobs.results.items() if alive and k >= min(alive)}
        return {
            f"out.payload.result.{name}": read_fields(rows, [offset], width)[:, 0].astype(np.int64)
            for name, offset, width in _RESULT_FIELDS
        }


def _dotted(path):
    """``("ray", "origin", 0)`` -> ``"ray.origin[0]"``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _leaf_paths(layout, prefix=()):
    """The paths of the scalar fields of ``layout`` (struct members and array elements)."""
    if isinstance(layout, data.ArrayLayout):
        for k in range(layout.length):
            yield from _leaf_paths(layout.elem_shape, (*prefix, k))
    elif isinstance(layout, data.Layout):
        for name, field in layout:
            yield from _leaf_paths(field.shape, (*prefix, name))
    else:
        yield prefix


#: The fields of an instruction that come with the lane (all but the node data), as
#: ``(input column, bit offset in INSTR_LAYOUT, width)``.
_LANE_FIELDS = [
    ("inst.payload." + _dotted(path), *field_span(INSTR_LAYOUT, *path))
    for path in _leaf_paths(data.Layout.cast(INSTR_LAYOUT))
    if path[0] != "node"
]
_NODE_OFFSET = field_span(INSTR_LAYOUT, "node", 0, 0)[0]
#: The result fields, as ``(column name below out.payload.result, offset in OUT_LAYOUT, width)``.
_RESULT_FIELDS = [
    (_dotted(path), *field_span(OUT_LAYOUT, *path))
    for path in _leaf_paths(data.Layout.cast(OUT_LAYOUT))
]
_OUT_WORDS_ZERO = np.zeros((data.Layout.cast(OUT_LAYOUT).size + 31) // 32, dtype=np.uint32)


class _FetchRefs(NodeFetchModel):
    """The node fetch of :meth:`RtUnitModel.columns`: an instruction handed on is
    ``(lane, data)``, the lane's reference (its payload ``row``; 0 for a slot never written)
    and the node data the L0 holds (references of fill beats, see :class:`_TraceStore`)."""

    def _instruction(self, entry, data):
        if entry is None:
            return {"tag": 0, "last": 0, "instr": (0, data)}
        return {"tag": entry["tag"], "last": entry["last"], "instr": (entry["row"], data)}


class _Jobs:
    """The accelerator's transaction model in :meth:`RtUnitModel.columns`: each instruction
    that finishes its slot groups becomes a numbered job, intersected later in a batch."""

    def __init__(self):
        self.count = 0
        self.pending = []  # (job index, (lane, data)) not yet intersected
        self.results = {}  # job index -> OUT_LAYOUT words

    def __call__(self, instr):
        index = self.count
        self.count += 1
        self.pending.append((index, instr))
        return index


class _TraceStore:
    """What the column loop's references point at: the lane fields of every lane taken (until
    its instruction is intersected) and the data of every fill beat offered.

    A fill beat's data enters the L0 as its reference (the cycle + 1), shifted into the beat's
    place; so a line's data in the L0 is the references of its beats, one per ``beat_bits``,
    which :meth:`instructions` turns back into words (0, a beat never filled: zero bits)."""

    def __init__(self, beats):
        self.beats = beats
        self.cycles = 0
        self.fills = {}  # reference -> beat words
        self.lanes = {}  # reference -> lane field values
        self._chunk = None

    def add(self, inputs, cycles):
        fill = np.asarray(inputs["fill.payload.data"], dtype=np.uint32).reshape(cycles, -1)
        valid = np.flatnonzero(np.asarray(inputs["fill.valid"]))
        base = self.cycles + 1
        for t, row in zip(valid.tolist(), fill[valid]):
            self.fills[base + t] = row
        self._chunk = np.stack(
            [np.asarray(inputs[name], dtype=np.uint64) for name, _, _ in _LANE_FIELDS], axis=1
        ) if cycles else None  # fmt: skip

    def keep_lanes(self, taken, base):
        for t, row in zip(taken, self._chunk[taken] if taken else ()):
            self.lanes[base + t + 1] = row
        self._chunk = None

    def instructions(self, jobs):
        """``INSTR_LAYOUT`` words of ``jobs`` (``(index, (lane, data))``); their lanes are
        forgotten."""
        lane_rows = np.zeros((len(jobs), len(_LANE_FIELDS)), dtype=np.uint64)
        beat_words = 32 // self.beats
        node = np.zeros((len(jobs), 32), dtype=np.uint32)
        bits = 1024 // self.beats
        for n, (_, (lane, ref)) in enumerate(jobs):
            if lane:
                lane_rows[n] = self.lanes.pop(lane)
            for beat in range(self.beats):
                fill = (ref >> (beat * bits)) & ((1 << bits) - 1)
                if fill:
                    node[n, beat * beat_words : (beat + 1) * beat_words] = self.fills[fill]
        writer = FieldWriter(len(jobs), INSTR_LAYOUT)
        for k, (_, offset, width) in enumerate(_LANE_FIELDS):
            writer.write(offset, width, lane_rows[:, k])
        writer.write(_NODE_OFFSET, 32, node)
        return writer.words()
