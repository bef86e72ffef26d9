"""The driver's traversal loop for a wave of 32 rays, bit exact, with a per-iteration trace.

One iteration of the loop (gpurt ``src/shaders/TraceRay3_1.hlsl``, reduced to what the hardware
sees) for every active lane:

1. ``image_bvh8_intersect_ray`` (mode ``bvh8``) or ``image_bvh_dual_intersect_ray`` (modes
   ``bvh4x2`` and ``bvh4``) on the lane's node(s), with the closest hit so far as the ray extent;
   every lane of the wave goes through the golden model in one batched call
   (:func:`gpurtl.golden.ray_accel.vector.intersect_wave.intersect_wave`);
2. leaf handling: a triangle result closer than the closest hit becomes the closest hit; the
   primitive range continues through the stack's range update (BVH8) or the triangle's slots are
   replaced by ``INVALID_NODE`` (legacy nodes);
3. instance nodes: the transformed ray replaces the lane's ray and the BLAS root is pushed alone
   (DW6 = ``SKIP_0_7``, DW7 = root); a pop flagged ``blas2tlas_pop`` returns to the world ray;
4. ``ds_bvh_stack_push8_pop1`` / ``push8_pop2`` / ``push4_pop1`` (:mod:`.stack`) returns the
   next node(s); ``INVALID_NODE`` from an empty stack that overflowed starts the stackless
   walk-back: the parent of the last node (parent pointers of the BVH) is intersected again and
   the stack re-pushes only the siblings after that node; ``TERMINAL_NODE`` ends the lane.

Modes: ``bvh8`` -- RT IP 3.1 BVH8 nodes and compressed triangle-pair leaves, one node per lane
instruction (8 box tests). ``bvh4x2`` -- legacy FP32 BVH4 nodes, two nodes per dual instruction
(both engines: 8 box tests, the 8 results sorted together), ``push8_pop2`` returns the next two
nodes ("two live paths"). ``bvh4`` -- the same BVH4 nodes one at a time (4 box tests, one engine,
RDNA 2/3 style), ``push4_pop1``. The dual instruction's unused second node is an empty box node
(four ``INVALID_NODE`` children) that is not fetched and not counted: the golden model has no
single legacy form.

Known limit: after an overflow in ``bvh4x2`` the walk-back starts from the node popped second
(the deeper stack entry) of the two just visited; when the two come from different parents the
children just pushed for the other one can be lost, so a very small stack can miss a closest hit
there (the tests bound it). ``bvh8`` and ``bvh4`` walk back as the stack model says; with a ring
smaller than one node's children (below 8 entries) a BVH8 leaf pointer can be overwritten, and the
RT IP 3.1 walk-back rule (every triangle slot counts as visited) does not push it again, so such a
stack can miss a hit.

The loop itself is the one traversal loop of the package, :func:`gpurtl.golden.bvh.wavefront.steps`
(every decision of the shader written once); this module runs it on one wave with *scalar*
executors: every intersect step becomes the lanes' ``ray_accel`` instruction dictionaries and
every stack step the lanes' ``ds_bvh_stack`` requests, answered by the driver of
:func:`wave_program` (the golden ``intersect_wave`` and ``ds_bvh_stack`` models in
:func:`trace_wave`; the RTL sessions in ``sim/experiments/traversal/rtl.py``). The wave-batched
golden run answers the same steps with array executors; ``tests/golden/bvh/test_wavefront.py``
checks the two answers on every step, and the closest hits against the independent float64
traversal of :mod:`gpurtl.golden.bvh.traversal`.

The trace (:class:`WaveTrace`) holds, per loop iteration, the active lanes and the node lines they
fetch.
"""

import numpy as np

from gpurtl.facts.ray_accel import INVALID_NODE
from gpurtl.facts.rt_unit import DUAL_EMPTY_NODE, DUAL_EMPTY_PTR
from gpurtl.golden.bvh import wavefront as WF
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.vector.intersect_wave import intersect_wave

from . import stack as S

__all__ = [
    "COUNTERS",
    "LANES",
    "LaneSteps",
    "MODES",
    "Scene",
    "WaveTrace",
    "bvh8_answers",
    "dual_answers",
    "node_tests",
    "stack_answers",
    "trace_wave",
    "wave_program",
]

MODES = ("bvh8", "bvh4x2", "bvh4")
LANES = 32
COUNTERS = (
    "steps",
    "box_tests",
    "tri_tests",
    "instances",
    "stack_ops",
    "pushes",
    "pops",
    "fetches",
    "overflows",
    "walkback_steps",
)
_NULL_BOX = list(DUAL_EMPTY_NODE)
_NULL_PTR = DUAL_EMPTY_PTR  # type 5 at offset 0 (the header): never a real node
_POS_INF = 0x7F800000
#: DW4-7 of a triangle pair's result when it has no triangle 1
_NO_TRI1 = np.array([_POS_INF, 0x3F800000, 0x3F800000, 0], np.uint32)


def _is_special(p):
    return (p >> 3) == 0x1FFFFFFF


class Scene:
    """A built scene for one mode: the top BVH (a BLAS, or a TLAS whose instances hold BLASes),
    node lookup by pointer and parent pointers."""

    def __init__(self, name, top, mode):
        self.name, self.top, self.mode = name, top, mode
        self.legacy = mode != "bvh8"
        self.bvhs = [top] + ([blas for blas, _ in top.instances] if top.instances else [])
        self._parent = {}
        self._slot_ptr = {}
        self._leaf = {}
        for b, bvh in enumerate(self.bvhs):
            for box in bvh.boxes:
                for c in box.children:
                    self._parent[(b, c.ptr)] = box.ptr
                    if c.kind == "leaf" and self.legacy:
                        # a paired legacy node (type 1 = its triangle 1) is also reached as
                        # type 0 for its triangle 0; its parent's slot holds the type-1 pointer
                        for ptr in (c.ptr, c.ptr & ~7):
                            self._parent[(b, ptr)] = box.ptr
                            self._slot_ptr[(b, ptr)] = c.ptr
                            self._leaf[(b, ptr)] = c
                    elif c.kind == "leaf":
                        for k in range(len(getattr(c, "nodes", [None]))):
                            for pair in range(8):
                                ptr = (c.ptr + 0x10 * k) | (pair & 3) | ((pair & 4) << 1)
                                self._parent[(b, ptr)] = box.ptr
                                self._slot_ptr[(b, ptr)] = c.ptr
                        self._leaf[(b, c.ptr)] = c
        self.blas_index = {id(blas): k + 1 for k, (blas, _) in enumerate(top.instances or [])}
        self._tables = None

    @property
    def tables(self):
        """The scene's :class:`gpurtl.golden.bvh.wavefront.Tables` (built once): the node tables
        the loop runs on."""
        if self._tables is None:
            self._tables = WF.Tables(self.top)
        return self._tables

    def offset(self, ptr):
        return ((ptr & ~7) << 3) if self.legacy else ((ptr & ~0xF) << 3)

    def node(self, b, ptr):
        dw = self.bvhs[b].image[self.offset(ptr)]
        return list(dw) + [0] * (32 - len(dw))

    def parent(self, b, ptr):
        return self._parent.get((b, ptr))

    def slot_ptr(self, b, ptr):
        """The pointer as the parent's result slot holds it (pair 0 of a leaf's first node)."""
        return self._slot_ptr.get((b, ptr), ptr)

    def leaf(self, b, ptr):
        return self._leaf.get((b, ptr))


class WaveTrace:
    """Per-iteration record of one wave: ``active`` (lanes), ``lines`` (per active lane, the node
    lines it fetches, as ``(bvh, byte offset)``), ``walkbacks`` (lanes in a walk-back step),
    ``stack_dwords`` (DWORDs the stack instruction writes and reads), plus per-ray counters
    (``counts[name]``: arrays of 32), the closest hits (``t``, ``prim``, ``inst``) and how many
    iterations had two live paths (``dual_live``, ``dual_slots``)."""

    def __init__(self, n):
        self.active, self.lines, self.walkbacks, self.stack_dwords = [], [], [], []
        self.counts = {name: np.zeros(n, np.int64) for name in COUNTERS}
        self.t = np.full(n, np.inf)
        self.prim = np.full(n, -1, np.int64)
        self.inst = np.full(n, -1, np.int64)
        self.dual_live = self.dual_slots = 0


def stack_answers(requests, lds, stack_size):
    """The golden ``ds_bvh_stack`` responses to a wave's stack requests (the dicts
    :func:`wave_program` sends), one lane after the other on the LDS ``lds``."""
    return [
        S.stack_op(
            q["op"],
            q["stack_addr"],
            q["last_node_ptr"],
            q["data"],
            lds,
            stack_size=stack_size,
            prim_range=bool(q["prim_range"]),
        )
        for q in requests
    ]


def trace_wave(scene, origins, dirs, *, stack_size=16, record=None, stack_record=None):
    """Run the loop for up to 32 rays (float arrays (n, 3)) on the golden models; a
    :class:`WaveTrace`.

    ``record(instr, out)`` sees every intersect instruction, ``stack_record(request, response)``
    every stack instruction (for the RTL replay)."""
    lds = S.LdsMemory(32 * stack_size)
    program = wave_program(
        scene, origins, dirs, stack_size=stack_size, record=record, stack_record=stack_record
    )
    message = next(program)
    while True:
        kind, _lanes, items = message
        if kind == "intersect":
            answers = intersect_wave(items)
        else:
            answers = stack_answers(items, lds, stack_size)
        try:
            message = program.send(answers)
        except StopIteration as stop:
            return stop.value


def wave_program(
    scene, origins, dirs, *, stack_size=16, bases=None, record=None, stack_record=None
):
    """The loop of :func:`trace_wave` as a generator that leaves the two instructions to its
    driver: it yields ``("intersect", lanes, instrs)`` (the active lanes and their ``ray_accel``
    instructions) and expects their results sent back, then ``("stack", lanes, requests)`` (each lane's
    ``ds_bvh_stack`` request: ``op``, ``stack_addr`` as the 32-bit register, ``last_node_ptr``,
    ``data``, ``prim_range``) and expects ``(new_stack_addr, dst)`` per lane; every decision of
    the loop comes from what the driver sends. Returns the :class:`WaveTrace`. ``bases``: the
    LDS ``base`` of each lane's stack (default: the lane index).

    The loop is :func:`gpurtl.golden.bvh.wavefront.steps` on the scene's tables; the scalar
    executors here turn its array requests into the lanes' instructions and the driver's
    answers back into arrays (``stack_size`` is the driver's: the stack lives there)."""
    mode = scene.mode
    n = len(origins)
    tb = scene.tables
    tr = WaveTrace(n)
    lanes_of = LaneSteps(scene)
    addr = [S.initial_stack_addr(r if bases is None else bases[r]) for r in range(n)]
    program = WF.steps(tb, origins, dirs, mode=mode)
    message = next(program)
    while True:
        kind, args, info = message
        if kind == "stack":
            r, last, data = args
            lanes = r.tolist()
            requests = lanes_of.stack_requests(lanes, addr, last, data)
            responses = yield ("stack", lanes, requests)
            answer = lanes_of.stack_answers(tr, lanes, addr, requests, responses, stack_record)
        else:
            _tb, ray, r, rows, ptr, aux = args
            lanes = r.tolist()
            instrs, lines = lanes_of.instructions(kind, ray, r, rows, ptr)
            outs = yield ("intersect", lanes, instrs)
            tr.active.append(len(lanes))
            tr.lines.append(lines)
            tr.walkbacks.append(int(np.count_nonzero(info["walking"])))
            tr.stack_dwords.append(0)
            if record is not None:
                for instr, out in zip(instrs, outs):
                    record(instr, out)
            if kind == "intersect":
                answer = bvh8_answers(outs, aux)
            else:
                answer = dual_answers(outs, ptr)
                if mode == "bvh4x2":
                    tr.dual_slots += len(lanes)
                    tr.dual_live += int(np.count_nonzero(ptr[1] != _NULL_PTR))
        try:
            message = program.send(answer)
        except StopIteration as stop:
            res = stop.value
            break
    for name, counts in res.counts.items():
        tr.counts[name] += counts
    tr.t, tr.prim, tr.inst = res.t, res.prim, res.inst
    return tr


class LaneSteps:
    """The scalar executors of :func:`wave_program`: the array steps of
    :func:`gpurtl.golden.bvh.wavefront.steps` as per-lane instructions (:meth:`instructions`,
    :meth:`stack_requests`), and the driver's per-lane stack answers as the arrays the loop
    takes (:meth:`stack_answers`; the intersect answers: :func:`bvh8_answers`,
    :func:`dual_answers`) for the lanes of one wave of ``scene`` (a :class:`Scene`)."""

    def __init__(self, scene):
        tb, mode = scene.tables, scene.mode
        self.tb, self.mode = tb, mode
        self.desc = default_desc(wide_sort=0) if mode == "bvh4" else default_desc()
        self.op = {"bvh8": S.PUSH8_POP1, "bvh4x2": S.PUSH8_POP2, "bvh4": S.PUSH4_POP1}[mode]
        self.prim_range = mode == "bvh8"
        # the trace's BVH numbers are the scene's (a BLAS instanced twice is one table)
        self.bvh = [0] + [scene.blas_index[id(b)] for b in tb.bvhs[1:]]
        self.type_mask = ~7 if mode != "bvh8" else ~0xF

    def _line(self, b, ptr):
        return (self.bvh[b], (int(ptr) & self.type_mask) << 3)

    def instructions(self, kind, ray, r, rows, ptr):
        """``(instrs, lines)``: the ``ray_accel`` instructions of lanes ``r`` for one request of
        ``kind`` (``"intersect"`` or ``"intersect_dual"``, with the request's ``ray``, ``rows``
        and ``ptr``) and the node lines each lane fetches, as ``(bvh, byte offset)``."""
        tb = self.tb
        where = ray.where[r].tolist()
        origin, direction, extent = ray.o[r].tolist(), ray.d[r].tolist(), ray.t_hit[r].tolist()
        instrs, lines = [], []
        for k in range(len(where)):
            ray_k = {
                "origin": origin[k],
                "dir": direction[k],
                "extent": extent[k],
                "instance_mask": 0xFF,
            }
            if kind == "intersect":
                p = int(ptr[k])
                node_ptr, nodes = [p, 0], [tb.dwords[rows[k]].tolist(), [0] * 32]
                lines.append((self._line(where[k], p),))
            else:
                p0, p1 = int(ptr[0][k]), int(ptr[1][k])
                node_ptr, nodes = [p0, p1], [tb.dwords[rows[0][k]].tolist(), _NULL_BOX]
                lane_lines = [self._line(where[k], p0)]
                if p1 != _NULL_PTR:
                    nodes[1] = tb.dwords[rows[1][k]].tolist()
                    lane_lines.append(self._line(where[k], p1))
                lines.append(tuple(lane_lines))
            instrs.append(
                {
                    "dual": int(kind != "intersect"),
                    "ray": ray_k,
                    "node_ptr": node_ptr,
                    "node": nodes,
                    "pointer_flags": 0,
                    "desc": self.desc,
                }
            )
        return instrs, lines

    def stack_requests(self, lanes, addr, last, data):
        """The ``ds_bvh_stack`` requests of ``lanes`` (a list) for one stack request of the loop
        (``last`` (M,), ``data`` (M, 8)), with the lanes' stack registers ``addr``."""
        prim_range = int(self.prim_range)
        return [
            {
                "op": self.op,
                "stack_addr": addr[lane],
                "last_node_ptr": lp,
                "data": row,
                "prim_range": prim_range,
            }
            for lane, lp, row in zip(lanes, last.tolist(), data.tolist())
        ]

    def stack_answers(self, tr, lanes, addr, requests, responses, stack_record):
        """``(first, second, pushed, overflowed, b2t)`` of the lanes' stack responses (the
        answer of :class:`gpurtl.golden.bvh.wavefront.GoldenStack`); ``addr``: the lanes' stack
        registers (updated); ``tr``: the :class:`WaveTrace` that counts them, or ``None``."""
        m = len(lanes)
        first = np.full(m, INVALID_NODE, np.uint32)
        second = np.full(m, INVALID_NODE, np.uint32)
        pushed = np.zeros(m, np.int64)
        overflowed = np.zeros(m, bool)
        b2t = np.zeros(m, bool)
        pop2 = self.op == S.PUSH8_POP2
        for k, (lane, request, response) in enumerate(zip(lanes, requests, responses)):
            new_addr, dst = response
            if stack_record is not None:
                stack_record(request, (new_addr, dst))
            before, after = S.unpack_stack_addr(addr[lane]), S.unpack_stack_addr(new_addr)
            overflowed[k] = after["has_overflowed"] and not before["has_overflowed"]
            b2t[k] = bool(after["blas2tlas_pop"])
            addr[lane] = new_addr
            first[k], second[k] = dst if pop2 else (dst, INVALID_NODE)
            pushed[k] = _pushed(request["data"], request["last_node_ptr"], self.op, self.prim_range)
            pops = 1 + (pop2 and not _is_special(int(second[k])))
            if tr is not None:
                tr.counts["stack_ops"][lane] += 1
                tr.stack_dwords[-1] += int(pushed[k]) + pops
        return first, second, pushed, overflowed, b2t


def bvh8_answers(outs, kinds):
    """The lanes' ``image_bvh8_intersect_ray`` results as
    :func:`gpurtl.golden.bvh.wavefront.intersect_golden` answers them."""
    kb, kp, ki = kinds
    dw = np.array([o["dw"] for o in outs], np.uint32).reshape(len(outs), -1)
    box = dw[kb, :8] if kb.any() else None
    pair = inst = None
    if kp.any():
        d = dw[kp]
        pair = (
            d[:, [0, 4]],
            (d[:, [3, 7]] >> 1).astype(np.int64),
            (d[:, 4:8] != _NO_TRI1).any(axis=1),
            d[:, 8] & 3,
        )
    if ki.any():
        picked = [o for o, k in zip(outs, ki) if k]
        inst = (
            (dw[ki, 7] & 0xFF) != 0xFF,
            np.array([o["origin"] for o in picked], np.uint32).reshape(-1, 3),
            np.array([o["dir"] for o in picked], np.uint32).reshape(-1, 3),
        )
    return box, pair, inst


def dual_answers(outs, ptrs):
    """The lanes' ``image_bvh_dual_intersect_ray`` results as
    :func:`gpurtl.golden.bvh.wavefront.intersect_dual_golden` answers them: the box halves'
    pointers, the triangle halves' ``t_num / t_den``."""
    m = len(outs)
    dw = np.array([o["dw"] for o in outs], np.uint32).reshape(m, -1)
    is_box = [(p & 7) == 5 for p in ptrs]
    slots = np.full((m, 8), INVALID_NODE, np.uint32)
    both = is_box[0] & is_box[1]
    slots[both] = dw[both, :8]
    t = np.full((m, 2), np.inf, np.float32)
    for h in (0, 1):
        one = is_box[h] & ~both
        slots[one, 4 * h : 4 * h + 4] = dw[one, 4 * h : 4 * h + 4]
        tri = ~is_box[h]
        with np.errstate(all="ignore"):
            t[tri, h] = dw[tri, 4 * h].view(np.float32) / dw[tri, 4 * h + 1].view(np.float32)
    return slots, t


_COUNT_CACHE = {}


def node_tests(instr, out):
    """``(kind, box tests, triangle tests)`` of a BVH8 intersect instruction and its result:
    kind 0 a box node (its children tested), 1 a triangle pair (one or two triangles), 2 an
    instance node."""
    ptr = instr["node_ptr"][0]
    if ptr & 0xF == 5:
        return 0, _box8_count(instr["node"][0]), 0
    if ptr & 7 <= 3:
        tri1 = list(out["dw"][4:8]) != [_POS_INF, 0x3F800000, 0x3F800000, 0]
        return 1, 0, 1 + int(tri1)
    return 2, 0, 0


def _box8_count(dwords):
    key = tuple(dwords[:8])
    k = _COUNT_CACHE.get(key)
    if k is None:
        from gpurtl.golden.ray_accel.encode import box_node

        k = box_node.decode_box8(dwords)["count"]
        _COUNT_CACHE[key] = k
    return k


def _pushed(data, last, op, prim_range):
    """Entries the stack instruction writes (for the LDS traffic count)."""
    if op == S.PUSH4_POP1:
        data = list(data[:4]) + [INVALID_NODE] * 4
    return len(S.push_slots(last, data, rules31=op == S.PUSH8_POP1 and prim_range))
