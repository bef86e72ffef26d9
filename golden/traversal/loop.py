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

The trace (:class:`WaveTrace`) holds, per loop iteration, the active lanes and the node lines they
fetch. This loop is the independent reference of the wave-batched engine
(:mod:`gpurtl.golden.bvh.wavefront`): one lane at a time through the golden ``intersect_wave`` and
``ds_bvh_stack`` models, where the engine works on arrays (``tests/golden/bvh/test_wavefront.py``).
"""

import numpy as np

from gpurtl.facts.fp32 import f32_bits
from gpurtl.facts.ray_accel import INVALID_NODE, ROOT_NODE_PTR, SKIP_0_7, TERMINAL_NODE
from gpurtl.facts.rt_unit import DUAL_EMPTY_NODE, DUAL_EMPTY_PTR
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.vector.intersect_wave import intersect_wave

from . import stack as S

__all__ = [
    "COUNTERS",
    "LANES",
    "MODES",
    "Scene",
    "WaveTrace",
    "node_tests",
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


def _tri_t(t_num, t_den):
    with np.errstate(all="ignore"):
        return float(
            np.float32(np.uint32(t_num).view(np.float32))
            / np.float32(np.uint32(t_den).view(np.float32))
        )


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
            answers = [
                S.stack_op(
                    q["op"],
                    q["stack_addr"],
                    q["last_node_ptr"],
                    q["data"],
                    lds,
                    stack_size=stack_size,
                    prim_range=bool(q["prim_range"]),
                )
                for q in items
            ]
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
    LDS ``base`` of each lane's stack (default: the lane index)."""
    mode = scene.mode
    n = len(origins)
    tr = WaveTrace(n)
    desc = default_desc(wide_sort=0) if mode == "bvh4" else default_desc()
    op = {"bvh8": S.PUSH8_POP1, "bvh4x2": S.PUSH8_POP2, "bvh4": S.PUSH4_POP1}[mode]
    prim_range = mode == "bvh8"
    o_bits = np.asarray(origins, np.float32).view(np.uint32)
    d_bits = np.asarray(dirs, np.float32).view(np.uint32)
    world = [([int(v) for v in o_bits[r]], [int(v) for v in d_bits[r]]) for r in range(n)]
    space = list(world)
    where = [0] * n  # index of the lane's current BVH in scene.bvhs
    inst = [-1] * n
    t_hit = [_POS_INF] * n
    nodes = [[ROOT_NODE_PTR, INVALID_NODE] for _ in range(n)]
    walk = [None] * n  # the child being walked back from, or None
    addr = [S.initial_stack_addr(r if bases is None else bases[r]) for r in range(n)]
    done = [False] * n
    while not all(done):
        lanes = [r for r in range(n) if not done[r]]
        instrs, lines = [], []
        for r in lanes:
            b = where[r]
            ray = {
                "origin": space[r][0],
                "dir": space[r][1],
                "extent": t_hit[r],
                "instance_mask": 0xFF,
            }
            n0, n1 = nodes[r]
            if mode == "bvh8":
                instrs.append(
                    {
                        "dual": 0,
                        "ray": ray,
                        "node_ptr": [n0, 0],
                        "node": [scene.node(b, n0), [0] * 32],
                        "pointer_flags": 0,
                        "desc": desc,
                    }
                )
                lines.append(((b, scene.offset(n0)),))
            else:
                ptrs, dws = [n0, _NULL_PTR], [scene.node(b, n0), _NULL_BOX]
                lane_lines = [(b, scene.offset(n0))]
                if not _is_special(n1):
                    ptrs[1], dws[1] = n1, scene.node(b, n1)
                    lane_lines.append((b, scene.offset(n1)))
                lines.append(tuple(lane_lines))
                instrs.append(
                    {
                        "dual": 1,
                        "ray": ray,
                        "node_ptr": ptrs,
                        "node": dws,
                        "pointer_flags": 0,
                        "desc": desc,
                    }
                )
        outs = yield ("intersect", lanes, instrs)
        tr.active.append(len(lanes))
        tr.lines.append(lines)
        tr.walkbacks.append(sum(1 for r in lanes if walk[r] is not None))
        tr.stack_dwords.append(0)
        requests = []
        for r, instr, out in zip(lanes, instrs, outs):
            if record is not None:
                record(instr, out)
            c = tr.counts
            c["steps"][r] += 1
            c["fetches"][r] += 1 + (instr["dual"] and instr["node_ptr"][1] != _NULL_PTR)
            if walk[r] is not None:
                c["walkback_steps"][r] += 1
            b = where[r]
            dw = out["dw"]
            data = [INVALID_NODE] * 8
            last_arg = INVALID_NODE
            if mode == "bvh8":
                n0 = nodes[r][0]
                _, box_tests, tri_tests = node_tests(instr, out)
                c["box_tests"][r] += box_tests
                c["tri_tests"][r] += tri_tests
                if n0 & 0xF == 5:
                    data = dw[:8]
                elif n0 & 7 <= 3:
                    for k in (0, 1):
                        t = dw[4 * k]
                        if t < _POS_INF and t < t_hit[r] and not t & 0x80000000:
                            t_hit[r] = t
                            tr.prim[r] = dw[4 * k + 3] >> 1
                            tr.inst[r] = inst[r]
                    data = [INVALID_NODE] * 7 + [n0]
                    last_arg = 0xFFFFFFF8 | (dw[8] & 3)
                else:  # instance
                    c["instances"][r] += 1
                    if dw[7] & 0xFF != 0xFF:
                        blas, _ = scene.top.instances[
                            scene.bvhs[b].by_offset[scene.offset(n0)].index
                        ]
                        where[r] = scene.blas_index[id(blas)]
                        inst[r] = scene.bvhs[b].by_offset[scene.offset(n0)].index
                        space[r] = (list(out["origin"]), list(out["dir"]))
                        data = [INVALID_NODE] * 6 + [SKIP_0_7, ROOT_NODE_PTR]
            else:
                half = []
                for s, ptr in enumerate(instr["node_ptr"]):
                    if ptr == _NULL_PTR:
                        half.append([INVALID_NODE] * 4)
                        continue
                    if ptr & 7 == 5:
                        c["box_tests"][r] += sum(
                            1 for p in instr["node"][s][:4] if p != INVALID_NODE
                        )
                        half.append(None)
                    else:
                        c["tri_tests"][r] += 1
                        leaf = scene.leaf(b, ptr)
                        pair = getattr(leaf, "legacy_tris", None)
                        partner = ptr & ~7
                        if ptr & 7 == 1 and partner not in instr["node_ptr"]:
                            # triangle 1 of a paired node: triangle 0 is the next node
                            half.append([partner] + [INVALID_NODE] * 3)
                        t = _tri_t(dw[4 * s], dw[4 * s + 1])
                        if (
                            np.isfinite(t)
                            and t >= 0
                            and np.float32(t) < np.uint32(t_hit[r]).view(np.float32)
                        ):
                            t_hit[r] = f32_bits(t)
                            tr.prim[r] = int(pair[ptr & 1] if pair else leaf.prims[0])
                        if len(half) == s:
                            half.append([INVALID_NODE] * 4)
                if half[0] is None and half[1] is None:
                    data = dw[:8]
                else:
                    data = (dw[:4] if half[0] is None else half[0]) + (
                        dw[4:8] if half[1] is None else half[1]
                    )
                if mode == "bvh4":
                    data = data[:4] + [INVALID_NODE] * 4
                if mode == "bvh4x2":
                    tr.dual_slots += 1
                    tr.dual_live += instr["node_ptr"][1] != _NULL_PTR
            if walk[r] is not None:
                last_arg = walk[r]
            requests.append(
                {
                    "op": op,
                    "stack_addr": addr[r],
                    "last_node_ptr": last_arg,
                    "data": list(data),
                    "prim_range": int(prim_range),
                }
            )
        answers = yield ("stack", lanes, requests)
        for r, request, (new_addr, dst) in zip(lanes, requests, answers):
            c = tr.counts
            data, last_arg = request["data"], request["last_node_ptr"]
            visited = nodes[r][0]
            if stack_record is not None:
                stack_record(request, (new_addr, dst))
            c["stack_ops"][r] += 1
            before, after = S.unpack_stack_addr(addr[r]), S.unpack_stack_addr(new_addr)
            if after["has_overflowed"] and not before["has_overflowed"]:
                c["overflows"][r] += 1
            addr[r] = new_addr
            first, second = dst if op == S.PUSH8_POP2 else (dst, INVALID_NODE)
            pushes = _pushed(data, last_arg, op, prim_range)
            pops = 1 + (op == S.PUSH8_POP2 and not _is_special(second))
            c["pushes"][r] += pushes
            c["pops"][r] += pops
            tr.stack_dwords[-1] += pushes + pops
            if after["blas2tlas_pop"]:
                where[r], space[r], inst[r] = 0, world[r], -1
            if first == TERMINAL_NODE:
                done[r] = True
                continue
            if first == INVALID_NODE:
                # stackless walk-back: from the node just visited to its parent
                src = visited
                parent = scene.parent(where[r], src)
                if parent is None and where[r] != 0:
                    # BLAS root: back to the TLAS, to the instance's parent box
                    inst_ptr = _instance_ptr(scene, inst[r])
                    where[r], space[r], inst[r] = 0, world[r], -1
                    src, parent = inst_ptr, scene.parent(0, inst_ptr)
                if parent is None:
                    done[r] = True
                    continue
                walk[r] = scene.slot_ptr(where[r], src)
                nodes[r] = [parent, INVALID_NODE]
                continue
            walk[r] = None
            nodes[r] = [first, second]
        if len(tr.active) > 20000:
            raise RuntimeError("traversal loop does not terminate")
    for r in range(n):
        if t_hit[r] != _POS_INF:
            tr.t[r] = float(np.uint32(t_hit[r]).view(np.float32))
    return tr


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


def _instance_ptr(scene, index):
    for leaf in scene.top.leaves:
        if leaf.kind == "instance" and leaf.index == index:
            return leaf.ptr
    return None


def _pushed(data, last, op, prim_range):
    """Entries the stack instruction writes (for the LDS traffic count)."""
    if op == S.PUSH4_POP1:
        data = list(data[:4]) + [INVALID_NODE] * 4
    return len(S.push_slots(last, data, rules31=op == S.PUSH8_POP1 and prim_range))
