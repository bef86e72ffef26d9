"""Wave programs of many rays at once: the wave-batched loop's steps recorded as
:class:`.program.WavePrograms`.

:func:`build` runs :func:`gpurtl.golden.bvh.wavefront.trace` (mode ``bvh8``) with two recording
executors around its defaults: the intersect step sees each step's rays, node pointers and ray
operands (the ray in the current BVH's space, the closest hit so far as the extent), the stack
step each ray's ``last_node_ptr``, ``data`` and the ring's register fields before and after the
instruction. A ray's path does not depend on timing, and every ray of a wave takes part in every
iteration of its wave until it ends, so step ``k`` of the batched loop is iteration ``k`` of each
wave (the per-wave loop, :func:`gpurtl.golden.traversal.loop.wave_program`, runs the same
lanes). The records are then sorted into waves (32 consecutive rays), iterations and lanes.

The expected RT unit results come from the golden batch instruction model,
:func:`gpurtl.golden.ray_accel.vector.batch.intersect_words`, on the recorded operands and the
node dwords (not from the loop's own box and triangle paths); every decision the loop took from
its own paths is checked against those words (:class:`StreamError` if one differs). The
expected stack responses are the golden array stack's (:class:`gpurtl.golden.bvh.wavefront.
GoldenStack`) register fields and popped nodes, packed as the ``ds_bvh_stack`` block's register
(``base`` of wave slot 0: the lane index).

``tests/golden/traversal/test_streams.py`` checks the programs field by field against
:func:`.program.from_loop` (the per-wave loop through the golden ``intersect_wave`` and
``ds_bvh_stack`` models, one lane at a time).
"""

import numpy as np

from gpurtl.facts.ds_bvh_stack import StackOp
from gpurtl.facts.ray_accel import INSTR_LAYOUT, INVALID_NODE, OUT_LAYOUT
from gpurtl.facts.rt_unit import DUAL_EMPTY_NODE
from gpurtl.golden.bvh import wavefront as W
from gpurtl.golden.ray_accel.ds_bvh_stack import FIELDS as STACK_FIELDS
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.vector.batch import CHUNK, intersect_words
from gpurtl.golden.ray_accel.vector.bitfields import FieldWriter, field_span, read_fields

from .program import KIND_BOX, KIND_PAIR, LANE_FIELDS, WavePrograms, iteration_valu, pack_desc

__all__ = ["MODES", "PUSH8_POP1", "PUSH8_POP2", "StreamError", "build", "node_lines"]

#: ``StackOp.PUSH8_POP1`` and ``PUSH8_POP2`` (``gpurtl.facts.ds_bvh_stack``): the stack
#: instructions of modes bvh8 and bvh4x2
PUSH8_POP1 = int(StackOp.PUSH8_POP1)
PUSH8_POP2 = int(StackOp.PUSH8_POP2)
#: The modes programs are built in.
MODES = ("bvh8", "bvh4x2")
#: The second node's DWORDs of a dual instruction on one node (the node fetch's stand-in).
_EMPTY = np.array(DUAL_EMPTY_NODE, np.uint32)
_INV = np.uint32(INVALID_NODE)
_LANES = 32


class StreamError(RuntimeError):
    """The loop's decisions and the golden instruction model's words differ."""


class _Recorder:
    """The two executors of :func:`gpurtl.golden.bvh.wavefront.trace`, recording every step."""

    def __init__(self, n, stack_size, mode="bvh8"):
        self.stack = W.GoldenStack(n, stack_size, mode)
        self.steps = []  # per step: dict of arrays
        self.stacks = []

    def intersect_dual(self, tb, ray, r, rows, ptrs, dual):
        out = W.intersect_dual_golden(tb, ray, r, rows, ptrs, dual)
        slots, t = out
        self.steps.append(
            {
                "ray": r.copy(),
                "rows": [rows[0].copy(), rows[1].copy()],
                "ptrs": [ptrs[0].astype(np.uint32), ptrs[1].astype(np.uint32)],
                "origin": ray.o[r].copy(),
                "dir": ray.d[r].copy(),
                "extent": ray.t_hit[r].copy(),
                "slots": slots.copy(),
                "t": t.copy(),
            }
        )
        return out

    def intersect(self, tb, ray, r, rows, ptr, kinds):
        out = W.intersect_golden(tb, ray, r, rows, ptr, kinds)
        box, pair, inst = out
        kb, kp, _ki = kinds
        rec = {
            "ray": r.copy(),
            "rows": rows.copy(),
            "ptr": ptr.astype(np.uint32),
            "origin": ray.o[r].copy(),
            "dir": ray.d[r].copy(),
            "extent": ray.t_hit[r].copy(),
            "box": box,
            "kb": kb.copy(),
            "kp": kp.copy(),
        }
        if pair is not None:
            t2, prims, valid1, nav = pair
            rec["pair"] = (t2.copy(), prims.copy(), valid1.copy(), nav.copy())
        if inst is not None:
            rec["inst"] = (inst[0].copy(), inst[1].copy(), inst[2].copy())
        self.steps.append(rec)
        return out

    def _fields(self, r):
        st = self.stack.st
        return (
            st.valid[r].copy(),
            st.to_tlas[r].copy(),
            st.addr[r].copy(),
            st.has_tlas[r].copy(),
            st.overflowed[r].copy(),
            st.b2t[r].copy(),
        )

    def __call__(self, r, last, data):
        before = self._fields(r)
        out = self.stack(r, last, data)
        after = self._fields(r)
        self.stacks.append(
            (r.copy(), last.copy(), data.copy(), before, after, out[0].copy(), out[1].copy())
        )
        return out


def _pack(fields, lane):
    """Packed ``ds_bvh_stack`` ADDR registers of the ring fields ``(valid, to_tlas, addr,
    has_tlas, overflowed, b2t)`` with ``base`` = ``lane``."""
    valid, to_tlas, addr, has_tlas, overflowed, b2t = fields
    values = {
        "valid_entries": valid,
        "entries_to_tlas": to_tlas,
        "addr": addr,
        "base": lane,
        "has_tlas": has_tlas,
        "has_overflowed": overflowed,
        "blas2tlas_pop": b2t,
    }
    reg = np.zeros(len(lane), np.uint64)
    for name, low, width in STACK_FIELDS:
        v = np.asarray(values[name]).astype(np.uint64) & np.uint64((1 << width) - 1)
        reg |= v << np.uint64(low)
    return reg.astype(np.uint32)


def _instr_words(ptr, dwords, origin, direction, extent, desc):
    """``INSTR_LAYOUT`` word rows of BVH8 instructions (instance mask 0xFF, no pointer
    flags)."""
    m = len(ptr)
    w = FieldWriter(m, INSTR_LAYOUT)
    w.write(field_span(INSTR_LAYOUT, "ray", "origin", 0)[0], 32, origin)
    w.write(field_span(INSTR_LAYOUT, "ray", "dir", 0)[0], 32, direction)
    w.write(field_span(INSTR_LAYOUT, "ray", "extent")[0], 32, extent)
    w.write(*field_span(INSTR_LAYOUT, "ray", "instance_mask"), np.full(m, 0xFF, np.uint32))
    w.write(field_span(INSTR_LAYOUT, "node_ptr", 0)[0], 32, ptr)
    w.write(field_span(INSTR_LAYOUT, "node", 0, 0)[0], 32, dwords)
    offset, width = field_span(INSTR_LAYOUT, "desc")
    w.write(offset, width, np.full(m, desc, np.uint64))
    return w.words()


def _dual_words(ptrs, nodes, origin, direction, extent, desc):
    """``INSTR_LAYOUT`` word rows of ``image_bvh_dual_intersect_ray`` instructions on the two
    legacy nodes ``ptrs`` (two uint32 (M,) arrays) with their node DWORDs ``nodes`` (two (M,
    32) arrays; the second :data:`DUAL_EMPTY_NODE` where the step has one node)."""
    m = len(ptrs[0])
    w = FieldWriter(m, INSTR_LAYOUT)
    w.write(*field_span(INSTR_LAYOUT, "dual"), np.ones(m, np.uint32))
    w.write(field_span(INSTR_LAYOUT, "ray", "origin", 0)[0], 32, origin)
    w.write(field_span(INSTR_LAYOUT, "ray", "dir", 0)[0], 32, direction)
    w.write(field_span(INSTR_LAYOUT, "ray", "extent")[0], 32, extent)
    w.write(*field_span(INSTR_LAYOUT, "ray", "instance_mask"), np.full(m, 0xFF, np.uint32))
    w.write(field_span(INSTR_LAYOUT, "node_ptr", 0)[0], 32, np.stack(ptrs, axis=1))
    for h in (0, 1):
        w.write(field_span(INSTR_LAYOUT, "node", h, 0)[0], 32, nodes[h])
    offset, width = field_span(INSTR_LAYOUT, "desc")
    w.write(offset, width, np.full(m, desc, np.uint64))
    return w.words()


def _check_dual(rec, dw, status):
    """The loop's own dual results of one step (box slots, triangle ``t_num / t_den``) against
    the golden words, as :func:`gpurtl.golden.traversal.loop.dual_answers` reads them."""
    if status.any():
        raise StreamError("the golden instruction model refused a loop instruction")
    is_box = [(p & 7) == 5 for p in rec["ptrs"]]
    both = is_box[0] & is_box[1]
    slots = np.full(rec["slots"].shape, _INV, np.uint32)
    slots[both] = dw[both, :8]
    t = np.full(rec["t"].shape, np.inf, np.float32)
    for h in (0, 1):
        one = is_box[h] & ~both
        slots[one, 4 * h : 4 * h + 4] = dw[one, 4 * h : 4 * h + 4]
        tri = ~is_box[h]
        with np.errstate(all="ignore"):
            t[tri, h] = dw[tri, 4 * h].view(np.float32) / dw[tri, 4 * h + 1].view(np.float32)
    if not np.array_equal(slots, rec["slots"]):
        raise StreamError("a dual instruction's box results differ from the golden model's")
    if not np.array_equal(t.view(np.uint32), rec["t"].view(np.uint32)):
        raise StreamError("a dual instruction's triangle results differ from the golden model's")


def _out_fields(words):
    dw = read_fields(words, [field_span(OUT_LAYOUT, "dw", k)[0] for k in range(10)], 32)
    origin = read_fields(words, [field_span(OUT_LAYOUT, "origin", k)[0] for k in range(3)], 32)
    direction = read_fields(words, [field_span(OUT_LAYOUT, "dir", k)[0] for k in range(3)], 32)
    offset, width = field_span(OUT_LAYOUT, "status")
    return dw, origin, direction, read_fields(words, [offset], width)[:, 0]


def _check_decisions(rec, dw, origin, direction, status):
    """The loop's own results of one step against the golden words."""
    if status.any():
        raise StreamError("the golden instruction model refused a loop instruction")
    kb, kp = rec["kb"], rec["kp"]
    if rec["box"] is not None and not np.array_equal(dw[kb, :8], rec["box"]):
        raise StreamError("a box node's sorted children differ from the golden model's")
    if "pair" in rec:
        t2, prims, valid1, nav = rec["pair"]
        d = dw[kp]
        ok = np.array_equal(d[:, [0, 4]], t2) and np.array_equal(d[:, 3] >> 1, prims[:, 0])
        ok = ok and np.array_equal((d[:, 7] >> 1)[valid1], prims[valid1, 1])
        if not (ok and np.array_equal(d[:, 8] & 3, nav)):
            raise StreamError("a triangle pair's results differ from the golden model's")
    if "inst" in rec:
        hit, new_o, new_d = rec["inst"]
        ki = ~kb & ~kp
        same = np.array_equal((dw[ki, 7] & 0xFF) != 0xFF, hit)
        same = same and np.array_equal(origin[ki][hit], new_o[hit])
        if not (same and np.array_equal(direction[ki][hit], new_d[hit])):
            raise StreamError("an instance node's results differ from the golden model's")


def node_lines(tables):
    """``(lines, line_words)`` of the top BVH's node image: line indices (byte offset / 128)
    and their 32 DWORDs (the memory behind the RT unit's L0). A legacy 64-byte node at an odd
    64-byte offset is its line's upper half."""
    bvh = tables.bvhs[0]
    lines = sorted({o // 128 for o in bvh.image})
    index = {line: k for k, line in enumerate(lines)}
    words = np.zeros((len(lines), 32), np.uint32)
    for o, node in bvh.image.items():
        dw = np.asarray(node, np.uint32)
        start = (o % 128) // 4
        dw = dw[: 32 - start]
        words[index[o // 128], start : start + len(dw)] = dw
    return np.array(lines, np.int64), words


def build(tables, origins, dirs, params, *, stack_size=16, mode=None):
    """The :class:`.program.WavePrograms` of rays ``origins`` / ``dirs`` (float arrays (n, 3);
    waves of 32 consecutive rays, in dispatch order) through ``tables`` (a
    :class:`gpurtl.golden.bvh.wavefront.Tables`), VALU cycles from the CU parameters
    ``params``. ``mode``: ``bvh8`` (BVH8 tables, the default for them) or ``bvh4x2`` (legacy
    BVH4 tables, the default for them: two nodes a step through ``image_bvh_dual_intersect_ray``
    and ``ds_bvh_stack_push8_pop2``; as the per-wave loop records them, a lane's box and
    triangle test counts are 0 in this mode). The loop's result
    (:class:`gpurtl.golden.bvh.wavefront.Result`: closest hits, counters) is in the programs'
    ``result`` attribute (not a field)."""
    mode = mode or ("bvh4x2" if tables.legacy else "bvh8")
    if mode not in MODES or tables.legacy != (mode == "bvh4x2"):
        kind = "legacy BVH4" if tables.legacy else "BVH8"
        raise ValueError(
            f"`mode` must be bvh8 for BVH8 tables or bvh4x2 for legacy ones, not {mode!r} "
            f"({kind} tables)"
        )
    dual = mode == "bvh4x2"
    n = len(origins)
    rec = _Recorder(n, stack_size, mode)
    step = {"intersect_dual": rec.intersect_dual} if dual else {"intersect": rec.intersect}
    res = W.trace(tables, origins, dirs, mode=mode, stack_size=stack_size, stack=rec, **step)
    desc = pack_desc(default_desc())
    cols = {name: [] for name in LANE_FIELDS}
    ray_cols, step_cols = [], []
    for step, (s, q) in enumerate(zip(rec.steps, rec.stacks, strict=True)):
        r = s["ray"]
        qr, last, data, before, after, first, second = q
        if not np.array_equal(qr, r):
            raise StreamError("a ray left the loop between its intersect and stack steps")
        m = len(r)
        dw = np.empty((m, 10), np.uint32)
        ro = np.empty((m, 3), np.uint32)
        rd = np.empty((m, 3), np.uint32)
        status = np.empty(m, np.uint32)
        if dual:
            two = s["rows"][1] >= 0
            nodes = [
                tables.dwords[s["rows"][0]],
                np.where(two[:, None], tables.dwords[np.maximum(s["rows"][1], 0)], _EMPTY),
            ]
        else:
            nodes = tables.dwords[s["rows"]]
        for a in range(0, m, CHUNK):
            b = min(a + CHUNK, m)
            if dual:
                instr = _dual_words(
                    [x[a:b] for x in s["ptrs"]], [x[a:b] for x in nodes], s["origin"][a:b],
                    s["dir"][a:b], s["extent"][a:b], desc,
                )  # fmt: skip
            else:
                instr = _instr_words(
                    s["ptr"][a:b], nodes[a:b], s["origin"][a:b], s["dir"][a:b],
                    s["extent"][a:b], desc,
                )  # fmt: skip
            dw[a:b], ro[a:b], rd[a:b], status[a:b] = _out_fields(intersect_words(instr))
        box_tests = np.zeros(m, np.int64)
        tri_tests = np.zeros(m, np.int64)
        if dual:
            _check_dual(s, dw, status)
            kind = np.where((s["ptrs"][0] & 7) == 5, KIND_BOX, KIND_PAIR).astype(np.uint8)
            ptr = np.stack(s["ptrs"], axis=1)
            dst = np.stack([first, second], axis=1)
        else:
            _check_decisions(s, dw, ro, rd, status)
            kind = tables.kind[s["rows"]].astype(np.uint8)
            kb = s["kb"]
            box_tests[kb] = tables.box_count[tables.box_index[s["rows"][kb]]]
            if "pair" in s:
                tri_tests[s["kp"]] = 1 + s["pair"][2]
            ptr = np.stack([s["ptr"], np.zeros(m, np.uint32)], axis=1)
            dst = np.stack([first, np.full(m, _INV, np.uint32)], axis=1)
        lane = (r % _LANES).astype(np.uint32)
        ray_cols.append(r)
        step_cols.append(np.full(m, step, np.int64))
        for name, value in (
            ("lane", lane),
            ("lane_kind", kind),
            ("box_tests", box_tests),
            ("tri_tests", tri_tests),
            ("origin", s["origin"]),
            ("dir", s["dir"]),
            ("extent", s["extent"]),
            ("node_ptr", ptr),
            ("result_dw", dw),
            ("result_origin", ro),
            ("result_dir", rd),
            ("result_status", status),
            ("stack_addr", _pack(before, lane)),
            ("stack_last", last),
            ("stack_data", data),
            ("stack_new_addr", _pack(after, lane)),
            ("stack_dst", dst),
        ):
            cols[name].append(value)
    ray = np.concatenate(ray_cols) if ray_cols else np.zeros(0, np.int64)
    step = np.concatenate(step_cols) if step_cols else np.zeros(0, np.int64)
    wave = ray // _LANES
    # wave-major, then iteration; within a step the rays are in increasing order (lanes)
    order = np.argsort(wave * (len(rec.steps) + 1) + step, kind="stable")
    total = len(ray)
    out = {}
    for name, parts in cols.items():
        if parts:
            out[name] = np.concatenate(parts)[order]
    dtypes = {
        "lane": np.uint8,
        "lane_kind": np.uint8,
        "box_tests": np.uint8,
        "tri_tests": np.uint8,
        "result_status": np.uint8,
    }
    for name, dtype in dtypes.items():
        out[name] = out[name].astype(dtype)
    out["dual"] = np.full(total, int(dual), np.uint8)
    out["instance_mask"] = np.full(total, 0xFF, np.uint8)
    out["pointer_flags"] = np.zeros(total, np.uint16)
    out["desc"] = np.full(total, desc, np.uint32)
    out["stack_op"] = np.full(total, PUSH8_POP2 if dual else PUSH8_POP1, np.uint8)
    out["stack_prim_range"] = np.full(total, int(not dual), np.uint8)
    out["stack_tri_size_opt"] = np.zeros(total, np.uint8)
    out["stack_error"] = np.zeros(total, np.uint8)
    # iterations: runs of equal (wave, step)
    key = (wave * (len(rec.steps) + 1) + step)[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if total else np.zeros(0, np.int64)
    iter_lanes = np.r_[starts, total].astype(np.int64)
    iter_wave = wave[order][starts]
    waves = -(-n // _LANES)
    wave_iters = np.r_[0, np.cumsum(np.bincount(iter_wave, minlength=waves))].astype(np.int64)
    kinds = np.bitwise_or.reduceat(
        (np.uint8(1) << out["lane_kind"]).astype(np.uint8), starts
    ) if total else np.zeros(0, np.uint8)  # fmt: skip
    lines, line_words = node_lines(tables)
    progs = WavePrograms(
        mode=mode,
        stack_size=stack_size,
        wave_rays=np.arange(0, n, _LANES, dtype=np.int64),
        wave_iters=wave_iters,
        wave_setup_valu=np.full(waves, params.setup_cycles, np.int64),
        wave_shade_valu=np.full(waves, params.shade_valu, np.int64),
        iter_lanes=iter_lanes,
        iter_kinds=kinds.astype(np.uint8),
        iter_valu=iteration_valu(kinds, params),
        lines=lines,
        line_words=line_words,
        **out,
    )
    progs.check()
    progs.result = res
    return progs
