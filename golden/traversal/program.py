"""Wave programs: each wave's instruction stream and expected results, recorded before any timing.

A ray's path through the BVH does not depend on timing, so a traversal loop can run first and
write down, per wave, every intersect and stack instruction with what the golden models answer;
a player (:mod:`gpurtl.sim.backends.fast.player`) then issues them to the RTL under the CU
model's RT-unit-mode rules (:func:`gpurtl.golden.cu.rt_unit.run`), checks every output against
the expected words here and takes every timing decision from the RTL.

:class:`WavePrograms` is pure data: flat numpy arrays with offsets (CSR form), so programs of
10^5 rays stay a few arrays. Layout:

* waves ``w`` in ``0 .. waves - 1`` (dispatch order: the player launches them in this order on
  the wave slots);
* iterations (one wave instruction ``image_bvh*_intersect_ray`` and the wave's stack
  instruction after it): wave ``w`` has iterations ``wave_iters[w] .. wave_iters[w + 1] - 1``;
* lane entries (one lane of one iteration): iteration ``i`` has entries
  ``iter_lanes[i] .. iter_lanes[i + 1] - 1``, in increasing lane order (the order the texture
  address path offers them to the RT unit).

:func:`from_loop` records programs from the per-wave loop
(:func:`gpurtl.golden.traversal.loop.wave_program`) with the golden ``intersect_wave`` and
``ds_bvh_stack`` models.
"""

from dataclasses import dataclass, fields

import numpy as np

from gpurtl.facts.ds_bvh_stack import StackOp

__all__ = [
    "KIND_BOX",
    "KIND_INSTANCE",
    "KIND_PAIR",
    "LANE_FIELDS",
    "ProgramSource",
    "WavePrograms",
    "from_loop",
    "iteration_valu",
    "pack_desc",
]

#: ``lane_kind`` values: the node a lane's intersect instruction visits (a box node, a triangle
#: pair, an instance node), as :func:`gpurtl.golden.traversal.loop.node_tests` and the CU model
#: count them.
KIND_BOX, KIND_PAIR, KIND_INSTANCE = 0, 1, 2

#: DESC_LAYOUT fields in bit order (``gpurtl.facts.ray_accel.DESC_LAYOUT``): name, width.
_DESC_BITS = (
    ("sort_en", 1),
    ("heuristic", 2),
    ("sort_tri_first", 1),
    ("box_grow", 8),
    ("wide_sort", 1),
    ("return_mode", 1),
    ("compressed", 1),
    ("box_node_64b", 1),
    ("instance_en", 1),
    ("pointer_flags_en", 1),
)

#: The per-lane-entry arrays (first axis: lane entries), for checks and slicing.
LANE_FIELDS = (
    "lane",
    "lane_kind",
    "box_tests",
    "tri_tests",
    "dual",
    "origin",
    "dir",
    "extent",
    "instance_mask",
    "node_ptr",
    "pointer_flags",
    "desc",
    "result_dw",
    "result_origin",
    "result_dir",
    "result_status",
    "stack_op",
    "stack_addr",
    "stack_last",
    "stack_data",
    "stack_prim_range",
    "stack_tri_size_opt",
    "stack_new_addr",
    "stack_dst",
    "stack_error",
)


def pack_desc(desc):
    """The ``DESC_LAYOUT`` value (an int, field ``sort_en`` at bit 0) of a descriptor dict."""
    value, low = 0, 0
    for name, width in _DESC_BITS:
        value |= (int(desc[name]) & ((1 << width) - 1)) << low
        low += width
    return value


def iteration_valu(kinds_mask, params):
    """VALU cycles of an iteration's branches as the CU model counts them
    (:func:`gpurtl.golden.cu.rt_unit.run`): ``box_valu`` if a lane visits a box node,
    ``pair_valu`` a triangle pair, ``instance_valu`` an instance (each once per wave
    instruction). ``kinds_mask``: an int array of :attr:`WavePrograms.iter_kinds`."""
    m = np.asarray(kinds_mask, np.int64)
    return (
        params.box_valu * ((m >> KIND_BOX) & 1)
        + params.pair_valu * ((m >> KIND_PAIR) & 1)
        + params.instance_valu * ((m >> KIND_INSTANCE) & 1)
    ).astype(np.int64)


@dataclass
class WavePrograms:
    """The instruction streams and expected results of ``waves`` waves, in dispatch order.

    Fields are numpy arrays (dtype as given); ``W`` waves, ``I`` iterations, ``L`` lane
    entries, ``N`` node lines. New fields may be added; none will be renamed.

    Attributes
    ----------
    mode : str
        Traversal mode of the loop (``bvh8``, ``bvh4x2``, ``bvh4``).
    stack_size : int
        The ``ds_bvh_stack`` ring size (``stack_size`` parameter of the block) the programs were
        recorded with.
    wave_rays : (W,) int64
        Index of each wave's first ray in the caller's ray list (rays of a wave: consecutive).
    wave_iters : (W + 1,) int64
        Offsets: wave ``w``'s iterations are ``wave_iters[w]:wave_iters[w + 1]`` (a wave with
        no iteration goes from set-up to shade).
    wave_setup_valu : (W,) int64
        VALU cycles of the wave's set-up before its first iteration (the CU model's
        ``setup_cycles``).
    wave_shade_valu : (W,) int64
        VALU cycles of its shading after the last iteration (``shade_valu``).
    iter_lanes : (I + 1,) int64
        Offsets: iteration ``i``'s lane entries are ``iter_lanes[i]:iter_lanes[i + 1]``
        (at least one: an iteration has an active lane).
    iter_kinds : (I,) uint8
        Bit ``KIND_BOX`` / ``KIND_PAIR`` / ``KIND_INSTANCE`` set when some lane of the
        iteration visits that kind of node (the branches the wave takes).
    iter_valu : (I,) int64
        VALU cycles of those branches before the intersect instruction issues
        (:func:`iteration_valu` of ``iter_kinds``).
    lane : (L,) uint8
        Lane index (0..31) of the entry in its wave.
    lane_kind : (L,) uint8
        The node kind the lane visits (``KIND_*``).
    box_tests, tri_tests : (L,) uint8
        Box and triangle tests of the lane's instruction (utilization counts).
    dual : (L,) uint8
        ``rt_unit`` ``inst.dual``: 0 ``image_bvh8_intersect_ray``, 1 the dual form.
    origin, dir : (L, 3) uint32
        ``inst.ray.origin`` / ``inst.ray.dir``: FP32 bit patterns.
    extent : (L,) uint32
        ``inst.ray.extent`` (FP32 bits: the closest hit so far).
    instance_mask : (L,) uint8
        ``inst.ray.instance_mask``.
    node_ptr : (L, 2) uint32
        ``inst.node_ptr`` (the node fetch reads line ``ptr >> 4`` of :attr:`line_words`, after
        ``node_ptr`` 's 16-byte units: ``(ptr & ~0xF) << 3`` bytes for BVH8).
    pointer_flags : (L,) uint16
        ``inst.pointer_flags``.
    desc : (L,) uint32
        ``inst.desc`` packed as ``DESC_LAYOUT`` (:func:`pack_desc`: ``sort_en`` bit 0).
        The ``tag`` (the wave slot) and ``last`` (the instruction's last lane) of ``inst`` are
        the player's.
    result_dw : (L, 10) uint32
        Expected ``out.result.dw``.
    result_origin, result_dir : (L, 3) uint32
        Expected ``out.result.origin`` / ``out.result.dir``.
    result_status : (L,) uint8
        Expected ``out.result.status``.
    stack_op : (L,) uint8
        The lane's ``ds_bvh_stack`` request ``op`` (``StackOp`` value).
    stack_addr : (L,) uint32
        Request ``stack_addr``, the packed 32-bit ADDR register, with the ``base`` of wave
        slot 0 (``BvhStackModel.base_of(0, lane)`` = the lane index): the player adds the base
        offset ``slot * stack_size * 32`` of the slot the wave runs in to the ``base`` field
        (bits 15..28) here and in :attr:`stack_new_addr`.
    stack_last : (L,) uint32
        Request ``last_node_ptr``.
    stack_data : (L, 8) uint32
        Request ``data``.
    stack_prim_range, stack_tri_size_opt : (L,) uint8
        Request ``prim_range`` and ``tri_size_opt``.
    stack_new_addr : (L,) uint32
        Expected response ``stack_addr`` (packed, base of slot 0 as above).
    stack_dst : (L, 2) uint32
        Expected response ``dst0``, ``dst1`` (``dst1`` is ``INVALID_NODE`` for the pop1 forms).
    stack_error : (L,) uint8
        Expected response ``error`` (0 in a loop's programs).
    lines : (N,) int64
        Node memory: line indices (byte address / 128), sorted.
    line_words : (N, 32) uint32
        Each line's 1024 bits as 32 DWORDs, DWORD 0 the low bits. Lines absent read as 0.
        The run warms the levels below L0 with every line here, in this order (as the session
        loop warms them with the scene's lines).
    """

    mode: str
    stack_size: int
    wave_rays: np.ndarray
    wave_iters: np.ndarray
    wave_setup_valu: np.ndarray
    wave_shade_valu: np.ndarray
    iter_lanes: np.ndarray
    iter_kinds: np.ndarray
    iter_valu: np.ndarray
    lane: np.ndarray
    lane_kind: np.ndarray
    box_tests: np.ndarray
    tri_tests: np.ndarray
    dual: np.ndarray
    origin: np.ndarray
    dir: np.ndarray
    extent: np.ndarray
    instance_mask: np.ndarray
    node_ptr: np.ndarray
    pointer_flags: np.ndarray
    desc: np.ndarray
    result_dw: np.ndarray
    result_origin: np.ndarray
    result_dir: np.ndarray
    result_status: np.ndarray
    stack_op: np.ndarray
    stack_addr: np.ndarray
    stack_last: np.ndarray
    stack_data: np.ndarray
    stack_prim_range: np.ndarray
    stack_tri_size_opt: np.ndarray
    stack_new_addr: np.ndarray
    stack_dst: np.ndarray
    stack_error: np.ndarray
    lines: np.ndarray
    line_words: np.ndarray

    @property
    def waves(self):
        """``W``, the number of waves."""
        return len(self.wave_rays)

    @property
    def iterations(self):
        """``I``, the number of iterations (wave instructions) of all waves."""
        return len(self.iter_kinds)

    @property
    def entries(self):
        """``L``, the number of lane entries (lane instructions) of all waves."""
        return len(self.lane)

    def check(self):
        """Raise ``ValueError`` if the arrays do not fit together (shapes, offsets)."""
        w, i, n = self.waves, self.iterations, self.entries
        if self.wave_iters.shape != (w + 1,) or self.iter_lanes.shape != (i + 1,):
            raise ValueError("offset arrays must have one more entry than their items")
        if self.wave_iters[0] != 0 or self.wave_iters[-1] != i:
            raise ValueError("wave_iters must run from 0 to the iteration count")
        if self.iter_lanes[0] != 0 or self.iter_lanes[-1] != n:
            raise ValueError("iter_lanes must run from 0 to the lane-entry count")
        if np.any(np.diff(self.wave_iters) < 0) or np.any(np.diff(self.iter_lanes) < 1):
            raise ValueError("offsets must not decrease; every iteration needs a lane")
        for name in ("wave_setup_valu", "wave_shade_valu"):
            if getattr(self, name).shape != (w,):
                raise ValueError(f"`{name}` must have one entry a wave")
        for name in ("iter_kinds", "iter_valu"):
            if getattr(self, name).shape != (i,):
                raise ValueError(f"`{name}` must have one entry an iteration")
        for name in LANE_FIELDS:
            if getattr(self, name).shape[:1] != (n,):
                raise ValueError(f"`{name}` must have one row a lane entry")
        if self.line_words.shape != (len(self.lines), 32):
            raise ValueError("`line_words` must be (lines, 32)")
        if np.any(np.diff(self.lines) <= 0):
            raise ValueError("`lines` must be sorted, each line once")

    def with_valu(self, params):
        """A copy whose VALU cycles are those of the CU parameters ``params`` (``setup_cycles``,
        ``shade_valu``, ``box_valu``, ``pair_valu``, ``instance_valu``)."""
        out = WavePrograms(**{f.name: getattr(self, f.name) for f in fields(self)})
        out.wave_setup_valu = np.full(self.waves, params.setup_cycles, np.int64)
        out.wave_shade_valu = np.full(self.waves, params.shade_valu, np.int64)
        out.iter_valu = iteration_valu(self.iter_kinds, params)
        return out

    def save(self, path):
        """Write the programs to an ``.npz`` file."""
        arrays = {f.name: getattr(self, f.name) for f in fields(self)}
        arrays["mode"] = np.array(self.mode)
        arrays["stack_size"] = np.array(self.stack_size)
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path):
        """Programs written by :meth:`save`."""
        with np.load(path) as z:
            values = {f.name: z[f.name] for f in fields(cls)}
        values["mode"] = str(values["mode"])
        values["stack_size"] = int(values["stack_size"])
        return cls(**values)


class _Recorder:
    """Lists of each field, filled a lane entry at a time."""

    def __init__(self):
        self.cols = {name: [] for name in LANE_FIELDS}
        self.iter_lanes, self.iter_kinds, self.wave_iters = [0], [], [0]

    def add(self, **values):
        for name, value in values.items():
            self.cols[name].append(value)


_DTYPES = {
    "lane": np.uint8,
    "lane_kind": np.uint8,
    "box_tests": np.uint8,
    "tri_tests": np.uint8,
    "dual": np.uint8,
    "origin": np.uint32,
    "dir": np.uint32,
    "extent": np.uint32,
    "instance_mask": np.uint8,
    "node_ptr": np.uint32,
    "pointer_flags": np.uint16,
    "desc": np.uint32,
    "result_dw": np.uint32,
    "result_origin": np.uint32,
    "result_dir": np.uint32,
    "result_status": np.uint8,
    "stack_op": np.uint8,
    "stack_addr": np.uint32,
    "stack_last": np.uint32,
    "stack_data": np.uint32,
    "stack_prim_range": np.uint8,
    "stack_tri_size_opt": np.uint8,
    "stack_new_addr": np.uint32,
    "stack_dst": np.uint32,
    "stack_error": np.uint8,
}
_SHAPES = {
    "origin": (3,),
    "dir": (3,),
    "node_ptr": (2,),
    "result_dw": (10,),
    "result_origin": (3,),
    "result_dir": (3,),
    "stack_data": (8,),
    "stack_dst": (2,),
}


def from_loop(scene, origins, dirs, params, *, stack_size=16, node_lines=None, wave_rays=32):
    """Record the programs of ``origins`` / ``dirs`` (float arrays (n, 3); waves of 32
    consecutive rays) through ``scene`` (a :class:`gpurtl.golden.traversal.loop.Scene`) with the
    per-wave loop :func:`~gpurtl.golden.traversal.loop.wave_program` on the golden
    ``intersect_wave`` and ``ds_bvh_stack`` models; VALU cycles from the CU parameters
    ``params``. ``node_lines``: ``{line: 1024-bit int}`` of the node memory (default: the
    scene's top BVH image, 128-byte lines); ``wave_rays``: rays a wave (up to 32: small waves
    make short test runs). A :class:`WavePrograms`; the per-wave
    :class:`~gpurtl.golden.traversal.loop.WaveTrace` of each wave is in its ``traces``
    attribute (not a field)."""
    from gpurtl.golden.ray_accel.ds_bvh_stack import BvhStackModel
    from gpurtl.golden.ray_accel.vector.intersect_wave import intersect_wave

    from .loop import node_tests, wave_program

    rec = _Recorder()
    traces, firsts = [], []
    if not 1 <= wave_rays <= 32:
        raise ValueError(f"`wave_rays` must be 1..32, not {wave_rays!r}")
    for first in range(0, len(origins), wave_rays):
        # a fresh LDS a wave, as trace_wave's: the player's RTL keeps its LDS between waves, so
        # a stack that read what an earlier wave left would show as a mismatch
        model = BvhStackModel(stack_size=stack_size, waves=1, lanes=32)
        firsts.append(first)
        program = wave_program(
            scene,
            origins[first : first + wave_rays],
            dirs[first : first + wave_rays],
            stack_size=stack_size,
            bases=[model.base_of(0, lane) for lane in range(32)],
        )
        message = next(program)
        trace = None
        while True:
            _, lanes, instrs = message
            outs = intersect_wave(instrs)
            _, _, requests = program.send(outs)
            rows = [model(dict(q, tri_size_opt=0)) for q in requests]
            answers = []
            mask = 0
            for lane, instr, out, q, a in zip(lanes, instrs, outs, requests, rows):
                kind, box, tri = node_tests(instr, out) if scene.mode == "bvh8" else (0, 0, 0)
                if scene.mode != "bvh8":
                    kind = _legacy_kind(instr)
                mask |= 1 << kind
                new_addr = _packed(a["stack_addr"])
                dst = (a["dst0"], a["dst1"])
                answers.append((new_addr, dst if q["op"] == _PUSH8_POP2 else a["dst0"]))
                ray = instr["ray"]
                rec.add(
                    lane=lane,
                    lane_kind=kind,
                    box_tests=box,
                    tri_tests=tri,
                    dual=instr["dual"],
                    origin=list(ray["origin"]),
                    dir=list(ray["dir"]),
                    extent=ray["extent"],
                    instance_mask=ray["instance_mask"],
                    node_ptr=list(instr["node_ptr"]),
                    pointer_flags=instr["pointer_flags"],
                    desc=pack_desc(instr["desc"]),
                    result_dw=list(out["dw"]),
                    result_origin=list(out["origin"]),
                    result_dir=list(out["dir"]),
                    result_status=out["status"],
                    stack_op=q["op"],
                    stack_addr=q["stack_addr"],
                    stack_last=q["last_node_ptr"],
                    stack_data=list(q["data"]),
                    stack_prim_range=q["prim_range"],
                    stack_tri_size_opt=0,
                    stack_new_addr=new_addr,
                    stack_dst=[a["dst0"], a["dst1"]],
                    stack_error=a["error"],
                )
            rec.iter_kinds.append(mask)
            rec.iter_lanes.append(len(rec.cols["lane"]))
            try:
                message = program.send(answers)
            except StopIteration as stop:
                trace = stop.value
                break
        traces.append(trace)
        rec.wave_iters.append(len(rec.iter_kinds))
    if node_lines is None:
        node_lines = _image_lines(scene)
    lines = np.array(sorted(node_lines), np.int64)
    words = np.array(
        [[(node_lines[int(ln)] >> (32 * k)) & 0xFFFFFFFF for k in range(32)] for ln in lines],
        np.uint32,
    ).reshape(len(lines), 32)
    w = len(firsts)
    cols = {
        name: np.array(values, _DTYPES[name]).reshape((-1, *_SHAPES.get(name, ())))
        for name, values in rec.cols.items()
    }
    kinds = np.array(rec.iter_kinds, np.uint8)
    out = WavePrograms(
        mode=scene.mode,
        stack_size=stack_size,
        wave_rays=np.array(firsts, np.int64),
        wave_iters=np.array(rec.wave_iters, np.int64),
        wave_setup_valu=np.full(w, params.setup_cycles, np.int64),
        wave_shade_valu=np.full(w, params.shade_valu, np.int64),
        iter_lanes=np.array(rec.iter_lanes, np.int64),
        iter_kinds=kinds,
        iter_valu=iteration_valu(kinds, params),
        lines=lines,
        line_words=words,
        **cols,
    )
    out.check()
    out.traces = traces
    return out


_PUSH8_POP2 = int(StackOp.PUSH8_POP2)


class ProgramSource:
    """Wave ``wave`` of ``programs`` as :func:`gpurtl.golden.cu.rt_unit.run` asks for it (its
    ``start``, ``results``, ``stacked``): each iteration's lanes become ``rt_unit`` instructions
    with the recorded payloads; the results are checked against the expected words (a
    difference raises ``ValueError`` naming wave, iteration, lane and field). So the golden RT
    unit can run the same programs as the compiled player."""

    def __init__(self, programs, wave):
        self.p, self.wave = programs, wave
        self.first = int(programs.wave_iters[wave])
        self.steps = int(programs.wave_iters[wave + 1]) - self.first
        self.step = 0

    def start(self, slot):
        self.slot = slot
        return self._message()

    def _entries(self):
        it = self.first + self.step
        return range(int(self.p.iter_lanes[it]), int(self.p.iter_lanes[it + 1]))

    def _message(self):
        if self.step == self.steps:
            return None
        p = self.p
        kinds, payloads = [], []
        for e in self._entries():
            kinds.append(int(p.lane_kind[e]))
            payloads.append(
                {
                    "tag": self.slot,
                    "last": 0,
                    "dual": int(p.dual[e]),
                    "ray": {
                        "origin": [int(v) for v in p.origin[e]],
                        "dir": [int(v) for v in p.dir[e]],
                        "extent": int(p.extent[e]),
                        "instance_mask": int(p.instance_mask[e]),
                    },
                    "node_ptr": [int(v) for v in p.node_ptr[e]],
                    "pointer_flags": int(p.pointer_flags[e]),
                    "desc": _unpack_desc(int(p.desc[e])),
                }
            )
        return kinds, payloads

    def results(self, results):
        """The intersect results are in (checked); the stack instruction's lane count."""
        p = self.p
        entries = self._entries()
        for e, out in zip(entries, results, strict=True):
            want = {
                "dw": [int(v) for v in p.result_dw[e]],
                "origin": [int(v) for v in p.result_origin[e]],
                "dir": [int(v) for v in p.result_dir[e]],
                "status": int(p.result_status[e]),
            }
            for name, value in want.items():
                got = out[name] if name == "status" else [int(v) for v in out[name]]
                if got != value:
                    raise ValueError(
                        f"wave {self.wave} iteration {self.step} lane {int(p.lane[e])}: "
                        f"`{name}` is {got}, expected {value}"
                    )
        return len(entries)

    def stacked(self):
        """The next iteration's message (``None``: the wave is done)."""
        self.step += 1
        return self._message()


def _unpack_desc(value):
    out, low = {}, 0
    for name, width in _DESC_BITS:
        out[name] = (value >> low) & ((1 << width) - 1)
        low += width
    return out


def _legacy_kind(instr):
    ptr = instr["node_ptr"][0]
    return KIND_BOX if ptr & 7 == 5 else KIND_PAIR


def _packed(fields_):
    from gpurtl.golden.ray_accel.ds_bvh_stack import pack_stack_addr

    return fields_ if isinstance(fields_, int) else pack_stack_addr(fields_)


def _image_lines(scene):
    """``line -> 1024-bit value`` of the scene's top BVH node image (a legacy 64-byte node at
    an odd 64-byte offset is its line's upper half)."""
    image = scene.bvhs[0].image
    lines = {}
    for offset, node in image.items():
        start = (offset % 128) // 4
        value = sum(int(w) << (32 * (start + k)) for k, w in enumerate(list(node)[: 32 - start]))
        lines[offset // 128] = lines.get(offset // 128, 0) | value
    return lines
