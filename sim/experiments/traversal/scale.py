"""The traversal loop at scale on the RTL: every intersect instruction through the ``ray_accel``
RTL and every stack instruction through the ``ds_bvh_stack`` RTL, in sessions of the fast
backend, for 10^5 rays and more (``gpurtl experiment traversal --rtl-scale RAYS``).

The loop is the wave-batched loop of :mod:`gpurtl.golden.bvh.wavefront` itself (``bvh8`` mode:
gpurt ``TraceRay3_1.hlsl`` on a BLAS of BVH8 box nodes and compressed triangle-pair leaves, with
the stackless walk-back), run with executors that send its instructions to the RTL
(:class:`_OnTheRtl`), round by round:

1. the scheduler hands the loop the active rays of the resident waves;
2. every one of them gets its ``image_bvh8_intersect_ray`` instruction (the ray, the closest hit
   so far as the extent, the node's 128 bytes), all of them one batch of word rows through the
   ``ray_accel`` session; the loop's shader side reads the RTL's results (a box node's sorted
   children, a triangle pair's distances and primitive ids: a closer hit becomes the ray's hit)
   and builds each ray's ``ds_bvh_stack_push8_pop1`` (RT IP 3.1 rules, primitive-range update);
3. those go as one batch through the ``ds_bvh_stack`` session, whose LDS keeps every resident
   ray's stack between rounds; the stack's answers decide what each ray does next: the popped
   node, ``TERMINAL_NODE`` (done) or ``INVALID_NODE`` (walk back to the parent of the node just
   visited).

A wave slot whose 32 rays are done takes the next wave (``slots`` waves resident, each lane's
stack at ``base = 32 * stack_size * slot + lane`` of the block's LDS). Both sessions compare
every output with the golden models as it comes out (``strict``: the first difference raises
:class:`gpurtl.sim.harness.session.MismatchError`), and the block's fixed latency is checked for
every instruction. The run checks function, not time: the cycle counts of these sessions are
those of the accelerator alone fed back to back, not of an RT unit (``docs/traversal.md``).
"""

import resource
import time

import numpy as np

from gpurtl.facts.ds_bvh_stack import STACK_ADDR_LAYOUT, STACK_REQUEST_LAYOUT, StackOp
from gpurtl.facts.ds_bvh_stack import STACK_RESPONSE_LAYOUT as STACK_OUT
from gpurtl.facts.ray_accel import (
    INSTR_LAYOUT,
    INVALID_NODE,
    OUT_LAYOUT,
    STATUS_OK,
)
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.golden.ray_accel.vector.bitfields import field_span, read_fields, write_fields

from ...core.words import words_from_dicts

__all__ = ["BUILDS", "SLOTS", "STACK_SIZE", "measure", "report", "trace"]

#: Accelerator builds run side by side: the registry's default (2 engines x 4 boxes, every path,
#: ``fpga`` FP preset) and the smallest build that runs a BLAS without OBBs at the same rate
#: (no OBB/instance transforms, one register stage per FP32 core).
BUILDS = (
    ("default (2x4, every path, fpga)", {}),
    ("2x4, no transforms, shallow", {"transforms": False, "fp": "shallow"}),
)
#: Resident waves: the ``ds_bvh_stack`` block's LDS holds ``waves * stack_size <= 512`` rows.
SLOTS = 32
STACK_SIZE = 16
LANES = 32
_INV = np.uint32(INVALID_NODE)
#: ``(t, 1.0, 1.0, 0)`` of a missed or absent triangle in result DW4-7 (the triangle-1 slot)
_NO_TRI = np.array([0x7F800000, 0x3F800000, 0x3F800000, 0], np.uint32)


def _offsets(layout, *path, count):
    return [field_span(layout, *path, k)[0] for k in range(count)]


class _Codec:
    """Word-row encoding of the two instructions and decoding of their results."""

    def __init__(self):
        self.template = words_from_dicts(
            INSTR_LAYOUT,
            [
                {
                    "dual": 0,
                    "ray": {"origin": [0] * 3, "dir": [0] * 3, "extent": 0, "instance_mask": 0xFF},
                    "node_ptr": [0, 0],
                    "node": [[0] * 32, [0] * 32],
                    "pointer_flags": 0,
                    "desc": default_desc(),
                }
            ],
        )
        self.origin = _offsets(INSTR_LAYOUT, "ray", "origin", count=3)
        self.dir = _offsets(INSTR_LAYOUT, "ray", "dir", count=3)
        self.extent = [field_span(INSTR_LAYOUT, "ray", "extent")[0]]
        self.ptr = [field_span(INSTR_LAYOUT, "node_ptr", 0)[0]]
        self.node = _offsets(INSTR_LAYOUT, "node", 0, count=32)
        self.dw = _offsets(OUT_LAYOUT, "dw", count=10)
        self.status = field_span(OUT_LAYOUT, "status")
        self.stack_template = words_from_dicts(
            STACK_REQUEST_LAYOUT,
            [
                {
                    "op": int(StackOp.PUSH8_POP1),
                    "stack_addr": {name: 0 for name in STACK_ADDR_LAYOUT.members},
                    "last_node_ptr": 0,
                    "data": [0] * 8,
                    "tri_size_opt": 0,
                    "prim_range": 1,
                }
            ],
        )
        self.stack_addr = [field_span(STACK_REQUEST_LAYOUT, "stack_addr")[0]]
        self.last = [field_span(STACK_REQUEST_LAYOUT, "last_node_ptr")[0]]
        self.data = _offsets(STACK_REQUEST_LAYOUT, "data", count=8)
        self.out_addr = [field_span(STACK_OUT, "stack_addr")[0]]
        self.out_dst0 = [field_span(STACK_OUT, "dst0")[0]]
        self.out_error = field_span(STACK_OUT, "error")
        self.base_shift = field_span(STACK_ADDR_LAYOUT, "base")[0]
        self.overflow_bit = np.uint32(1 << field_span(STACK_ADDR_LAYOUT, "has_overflowed")[0])

    def intersect(self, origin, direction, extent, ptr, dwords):
        rows = np.repeat(self.template, len(ptr), axis=0)
        write_fields(rows, self.origin, 32, origin)
        write_fields(rows, self.dir, 32, direction)
        write_fields(rows, self.extent, 32, extent[:, None])
        write_fields(rows, self.ptr, 32, ptr[:, None])
        write_fields(rows, self.node, 32, dwords)
        return rows

    def results(self, rows):
        """``(dw (M, 10), status (M,))`` of ``OUT_LAYOUT`` rows."""
        return read_fields(rows, self.dw, 32), read_fields(rows, [self.status[0]], self.status[1])

    def push8_pop1(self, stack_addr, last, data):
        rows = np.repeat(self.stack_template, len(last), axis=0)
        write_fields(rows, self.stack_addr, 32, stack_addr[:, None])
        write_fields(rows, self.last, 32, last[:, None])
        write_fields(rows, self.data, 32, data)
        return rows

    def answers(self, rows):
        """``(stack_addr, dst0, error)`` of ``STACK_RESPONSE_LAYOUT`` rows."""
        return (
            read_fields(rows, self.out_addr, 32)[:, 0],
            read_fields(rows, self.out_dst0, 32)[:, 0],
            read_fields(rows, [self.out_error[0]], self.out_error[1])[:, 0],
        )


class _OnTheRtl:
    """The executors of :func:`gpurtl.golden.bvh.wavefront.trace` that run the loop on the RTL:
    the scheduler of the resident wave slots (:meth:`schedule`), the intersect step through the
    ``ray_accel`` session (:meth:`intersect`) and the stack step through the ``ds_bvh_stack``
    session (:meth:`stack`), which keeps each resident ray's stack address register."""

    def __init__(self, n, accel, stack, slots, stack_size):
        self.codec = _Codec()
        self.n, self.accel, self.stack_session = n, accel, stack
        self.stack_size = stack_size
        self.addr = np.zeros(n, np.uint32)
        self.pair_nodes = np.zeros(n, np.int64)
        self.waves = -(-n // LANES)
        self.slot_wave = np.full(slots, -1, np.int64)
        self.next_wave = 0
        self.rounds = 0
        self.golden_cpu = {"accel": 0.0, "stack": 0.0}
        self.rtl_wall = dict(self.golden_cpu)

    def _exchange(self, name, session, rows):
        cpu = time.process_time()
        session.send_words(rows)
        self.golden_cpu[name] += time.process_time() - cpu
        wall = time.monotonic()
        out = session.receive_words()
        self.rtl_wall[name] += time.monotonic() - wall
        return out

    def schedule(self, active):
        """The active rays of the resident waves; an empty slot, or one whose wave is done, takes
        the next wave, each lane's stack at ``base = 32 * stack_size * slot + lane``."""
        for slot, w in enumerate(self.slot_wave):
            if w >= 0 and active[LANES * w : LANES * w + LANES].any():
                continue
            self.slot_wave[slot] = w = self.next_wave if self.next_wave < self.waves else -1
            if w >= 0:
                self.next_wave += 1
                rays = np.arange(LANES * w, min(LANES * w + LANES, self.n))
                base = (slot * self.stack_size * LANES + rays - LANES * w).astype(np.uint32)
                self.addr[rays] = base << np.uint32(self.codec.base_shift)
        live = self.slot_wave[self.slot_wave >= 0]
        resident = (live[:, None] * LANES + np.arange(LANES)).ravel()
        resident = resident[resident < self.n]
        r = resident[active[resident]]
        self.rounds += len(r) > 0
        return r

    def intersect(self, tables, ray, r, rows, ptr, kinds):
        """Every ray's ``image_bvh8_intersect_ray`` (its ray, the closest hit so far as the
        extent, the node's 128 bytes) as one batch through the accelerator; its results in the
        form of :func:`gpurtl.golden.bvh.wavefront.intersect_golden`."""
        box, pair, instance = kinds
        if instance.any():
            raise ValueError("the scale loop runs a BVH8 BLAS (no instance nodes)")
        codec = self.codec
        instr = codec.intersect(ray.o[r], ray.d[r], ray.t_hit[r], ptr, tables.dwords[rows])
        dw, status = codec.results(self._exchange("accel", self.accel, instr))
        if (status[:, 0] != STATUS_OK).any():
            k = int(np.flatnonzero(status[:, 0] != STATUS_OK)[0])
            raise RuntimeError(
                f"node {int(ptr[k]):#x}: the accelerator build does not model this node "
                f"(status {int(status[k, 0])})"
            )
        self.pair_nodes[r[pair]] += 1
        dp = dw[pair]
        # DW0-3 / DW4-7: (t, 1.0, 1.0, prim << 1 | ...) of triangles 0 and 1; DW8: navigation
        triangles = (
            dp[:, [0, 4]],
            (dp[:, [3, 7]] >> np.uint32(1)).astype(np.int64),
            (dp[:, 4:8] != _NO_TRI).any(axis=1),
            dp[:, 8] & np.uint32(3),
        )
        return (dw[box, :8] if box.any() else None), (triangles if pair.any() else None), None

    def stack(self, r, last, data):
        """Every ray's ``ds_bvh_stack_push8_pop1`` as one batch through the stack block, whose
        LDS keeps the stacks; the answer in the form of
        :class:`gpurtl.golden.bvh.wavefront.GoldenStack` (pushes not observed)."""
        codec = self.codec
        old = self.addr[r]
        answer = self._exchange("stack", self.stack_session, codec.push8_pop1(old, last, data))
        new, first, error = codec.answers(answer)
        if error.any():
            raise RuntimeError(f"ds_bvh_stack refused the register {int(old[error > 0][0]):#x}")
        self.addr[r] = new
        overflowed = ((new & ~old) & codec.overflow_bit) != 0
        none = np.zeros(len(r), bool)  # a BLAS: no pop returns to a TLAS
        return first, np.full(len(r), _INV, np.uint32), None, overflowed, none


def trace(
    tables,
    origins,
    dirs,
    accel,
    stack,
    *,
    slots=SLOTS,
    stack_size=STACK_SIZE,
    tmax=None,
    first_hit=False,
):
    """Run the loop (module doc string) for rays ``origins``/``dirs`` (float (N, 3)) through the
    open pipeline sessions ``accel`` (``ray_accel``) and ``stack`` (``ds_bvh_stack`` with at
    least ``slots`` waves of 32 lanes and ring size ``stack_size``). ``tmax``: the rays' initial
    extent (the first instruction's); ``first_hit``: a ray ends at its first accepted hit, before
    that step's stack instruction (``RAY_FLAG_ACCEPT_FIRST_HIT_AND_END_SEARCH``: a shader
    decision, taken from the accelerator's triangle results, not an operand of either block).

    ``tables``: :class:`gpurtl.golden.bvh.wavefront.Tables` of a BVH8 BLAS (node contents, parent
    pointers: what the shader and the memory know, not decisions). Returns the loop's
    :class:`gpurtl.golden.bvh.wavefront.Result` (``t``, ``prim``, per-ray ``counts``; the stack
    instructions as ``stack_ops``, those on triangle pairs as ``pair_nodes``; no ``pushes``) with
    ``rounds`` and the seconds spent per session (``golden_cpu_s[name]``: in-process CPU of
    sending, i.e. the golden model; ``rtl_wall_s[name]``: waiting for the RTL's outputs and
    comparing them; names ``"accel"`` and ``"stack"``)."""
    from gpurtl.golden.bvh import wavefront as WF

    if tables.legacy or tables.top.instances:
        raise ValueError("the scale loop runs a BVH8 BLAS (no instances, no legacy nodes)")
    rtl = _OnTheRtl(len(origins), accel, stack, slots, stack_size)
    res = WF.trace(
        tables,
        origins,
        dirs,
        tmax=tmax,
        first_hit=first_hit,
        intersect=rtl.intersect,
        stack=rtl.stack,
        schedule=rtl.schedule,
    )
    res.counts["stack_ops"] = res.counts.pop("pops")
    res.counts["pair_nodes"] = rtl.pair_nodes
    res.rounds, res.golden_cpu_s, res.rtl_wall_s = rtl.rounds, rtl.golden_cpu, rtl.rtl_wall
    return res


# --- the experiment's --rtl-scale run -----------------------------------------------------------


def _bunny(notes, warn):
    """``(name, mesh)``: the 56k Stanford Bunny, or the packaged small one (said in ``notes``)."""
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.bvh import scenes as S

    try:
        return "Stanford Bunny", S.stanford_bunny()
    except S.SceneUnavailable as error:
        note = f"the 56k bunny {error}; running on the packaged 907-triangle bunny instead"
        notes.append(note)
        if warn is not None:
            warn(note)
        return "bunny (907 tris)", M.bunny()


def image_size(rays):
    """``(width, height)`` of a 4:3 image in 8x4 tiles with at least ``rays`` pixels."""
    width = 8 * -(-int(np.ceil(np.sqrt(rays * 4 / 3))) // 8)
    return width, 4 * -(-rays // (4 * width))


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_build(tables, o, d, label, changes, backend, ref, stack_size, tmax=None, first=False):
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    accel_block, stack_block = registry.get("ray_accel"), registry.get("ds_bvh_stack")
    accel_params = accel_block.resolve(changes)
    stack_params = stack_block.resolve({"stack_size": stack_size, "waves": SLOTS, "lanes": LANES})
    chosen = BACKENDS[backend]
    opened = time.monotonic()
    accel = chosen.session(accel_block, accel_params, golden=True, strict=True)
    try:
        stack = chosen.session(stack_block, stack_params, golden=True, strict=True)
    except BaseException:
        accel.close()
        raise
    open_s = time.monotonic() - opened
    wall, cpu, children = time.monotonic(), time.process_time(), _children_cpu()
    driver = {}
    try:
        res = trace(tables, o, d, accel, stack, stack_size=stack_size, tmax=tmax, first_hit=first)
    finally:
        # one session at a time, so the CPU of each driver process is known once it has ended
        for name, session in (("stack", stack), ("accel", accel)):
            session.close()
            driver[name] = _children_cpu() - children - sum(driver.values())
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    model = getattr(accel, "model", None)
    same_hits = bool(np.array_equal(res.prim, ref.prim) and np.array_equal(res.t, ref.t))
    same = {k: bool(np.array_equal(res.counts[k], ref.counts[k])) for k in _COMPARED}
    intersect, stack_ops = int(res.counts["steps"].sum()), int(res.counts["stack_ops"].sum())
    return {
        "label": label,
        "params": {k: accel_params[k] for k in ("engines", "boxes_per_engine", "transforms", "fp")},
        "fp_cores": getattr(chosen, "fp_cores", None),
        "latency": getattr(model, "latency", None),
        "ii": getattr(model, "ii", None),
        "open_s": open_s,
        "wall_s": wall,
        "python_cpu_s": cpu,
        "driver_cpu_s": driver,
        "cpu_s": cpu + sum(driver.values()),
        "golden_cpu_s": res.golden_cpu_s,
        "rtl_wall_s": res.rtl_wall_s,
        "rounds": res.rounds,
        "intersect": intersect,
        "stack": stack_ops,
        "pair_instructions": int(res.counts["pair_nodes"].sum()),
        "accel_report": [accel.report.passed, accel.report.failed, accel.report.timing_errors],
        "stack_report": [stack.report.passed, stack.report.failed, stack.report.timing_errors],
        "accel_cycles": accel.report.cycles,
        "same_hits": same_hits,
        "same_counts": same,
        "hits": int((res.prim >= 0).sum()),
    }


_COMPARED = ("steps", "box_tests", "tri_tests", "overflows", "walkback_steps")


def _golden(tables, o, d, tmax, first, stack_size):
    """The golden loop on one ray set: its result and figures."""
    from gpurtl.golden.bvh import wavefront as WF

    c0 = time.process_time()
    ref = WF.trace(tables, o, d, tmax=tmax, first_hit=first, stack_size=stack_size)
    return ref, {
        "cpu_s": time.process_time() - c0,
        "intersect": int(ref.counts["steps"].sum()),
        "stack": int(ref.counts["pops"].sum()),
        "hits": int((ref.prim >= 0).sum()),
        "overflow_rays": int((ref.counts["overflows"] > 0).sum()),
        "walkback_steps": int(ref.counts["walkback_steps"].sum()),
    }


def measure(
    rays,
    camera,
    *,
    backend="fast-behavioural",
    builds=BUILDS,
    stack_size=STACK_SIZE,
    progress=None,
    warn=None,
    sets=("camera",),
    derive=None,
):
    """``{"scale": ..., "notes": [...]}``: ``rays`` camera rays (``camera(triangles)``: the
    :class:`gpurtl.golden.traversal.rays.Camera` of a mesh's triangles (n, 3, 3); a 4:3 image of at least ``rays``
    pixels) on the 56k bunny, the golden wave-batched loop once, then
    :func:`trace` on each accelerator build of ``builds`` (label, parameter changes) on
    ``backend``, with stacks of ``stack_size`` entries.

    ``sets``: the ray sets to run, the camera rays first; the others come from
    ``derive(triangles)``, a function ``(set_name, golden_result, origins, dirs) -> {name:
    (origins, dirs, tmax, first_hit)}`` of the sets that start at a set's hits. The camera set's
    figures are ``scale["golden"]`` and ``scale["builds"]``, each other set's one entry of
    ``scale["sets"]``."""
    from gpurtl.golden.bvh import wavefront as WF
    from gpurtl.golden.bvh import wide as W
    from gpurtl.golden.traversal.rays import camera_rays

    notes = []
    total = 1 + len(sets) * (1 + len(builds))
    name, mesh = _bunny(notes, warn)
    c0 = time.process_time()
    tables = WF.Tables(W.build_wide(mesh, width=8, leaf_pairs=4))
    build_cpu = time.process_time() - c0
    triangles = mesh.triangles.astype(np.float64)
    cam = camera(triangles)
    width, height = image_size(rays)
    o, d, _ = camera_rays(cam, width, height)
    done = 1
    if progress:
        progress(done, total, f"{name}: BVH8 built, {len(o)} camera rays")
    derived = derive(triangles) if derive is not None else None
    if sets[0] != "camera":
        raise ValueError(f"`sets` must start with the camera rays, not {sets[0]!r}")
    src, ran = {"camera": (o, d, None, False)}, {}
    queue = ["camera"]
    while queue and not set(sets) <= set(ran):
        set_name = queue.pop(0)
        so, sd, tmax, first = src[set_name]
        ref, golden = _golden(tables, so, sd, tmax, first, stack_size)
        if derived is not None:
            new = derived(set_name, ref, so, sd)
            src.update(new)
            queue += list(new)
        if set_name not in sets:
            ran[set_name] = None
            continue
        done += 1
        if progress:
            progress(done, total, f"{set_name}: golden wave-batched loop")
        runs = []
        for label, changes in builds:
            runs.append(
                _run_build(tables, so, sd, label, changes, backend, ref, stack_size, tmax, first)
            )
            done += 1
            if progress:
                progress(done, total, f"{set_name}, {label}: {runs[-1]['intersect']} intersect")
        extent = None if tmax is None else float(np.max(tmax, initial=0.0))
        ran[set_name] = {
            "name": set_name,
            "rays": len(so),
            "extent": extent,
            "first_hit": bool(first),
            "golden": golden,
            "builds": runs,
        }
    missing = [name for name in sets if name not in ran]
    if missing:
        raise ValueError(f"ray sets {', '.join(missing)} do not come from the camera rays")
    camera_set = ran["camera"]
    return {
        "scale": {
            "scene": name,
            "triangles": len(mesh),
            "bvh_cpu_s": build_cpu,
            "rays": len(o),
            "image": [width, height],
            "backend": backend,
            "slots": SLOTS,
            "stack_size": stack_size,
            "golden": camera_set["golden"],
            "builds": camera_set["builds"],
            "sets": [ran[name] for name in sets if name != "camera"],
        },
        "notes": notes,
    }


def _rate(count, seconds):
    return f"{count / seconds:,.0f}" if seconds else "-"


def _sets_table(sets, rows):
    """The summary's lines of the ray sets after the camera rays (none: no lines); their result
    rows are added to ``rows``."""
    if not sets:
        return []
    lines = [
        "",
        "Ray sets from the camera rays' hits, each through every build as above: shadow rays "
        "to the point light (extent 1: the segment) and AO rays end at their first accepted hit "
        "(`ACCEPT_FIRST_HIT_AND_END_SEARCH`: the shader leaves the loop after the intersect, so "
        "those steps have no stack instruction); diffuse bounces run to the closest hit.",
        "",
        "| ray set | rays | extent | first hit | build | intersect (on pairs) | stack | "
        "mismatches | timing errors | hits | hits and counts as golden | instructions / CPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rs in sets:
        extent = "inf" if rs["extent"] is None else f"{rs['extent']:.4g}"
        for b in rs["builds"]:
            both = b["intersect"] + b["stack"]
            mism = b["accel_report"][1] + b["stack_report"][1]
            timing = b["accel_report"][2] + b["stack_report"][2]
            same = b["same_hits"] and all(b["same_counts"].values())
            lines.append(
                f"| {rs['name']} | {rs['rays']} | {extent} | {'yes' if rs['first_hit'] else 'no'} "
                f"| {b['label']} | {b['intersect']} ({b['pair_instructions']}) | {b['stack']} | "
                f"{mism} | {timing} | {b['hits']} | {'yes' if same else 'NO'} | "
                f"{_rate(both, b['cpu_s'])} |"
            )
            rows.append(
                (
                    f"{rs['name']} ({rs['rays']} rays), {b['label']}: instructions, mismatches, "
                    "hits and counts as golden, instructions/CPU-s",
                    f"{both}, {mism}, {'yes' if same else 'NO'}, {_rate(both, b['cpu_s'])}",
                )
            )
    return lines


def report(data, out_dir):
    """``summary.md`` and the result rows of :func:`measure`'s data."""
    sc = data["scale"]
    out_dir.mkdir(parents=True, exist_ok=True)
    g = sc["golden"]
    lines = ["# Traversal at scale: every instruction through the RTL", ""]
    lines += [f"Note: {note}." for note in data["notes"]]
    lines += [
        f"{sc['rays']} camera rays ({sc['image'][0]}x{sc['image'][1]}) on the {sc['scene']} "
        f"({sc['triangles']} triangles), backend `{sc['backend']}`, {sc['slots']} resident waves "
        f"of 32 rays, stack size {sc['stack_size']}. Every intersect instruction went through the "
        "`ray_accel` RTL and every stack instruction through the `ds_bvh_stack` RTL, each output "
        "compared with the golden models as it came out; the loop's decisions are taken from the "
        "RTL's outputs. Function, not time: the cycles are those of the accelerator alone.",
        "",
        f"Golden wave-batched loop on the same rays: {g['intersect']} intersect and {g['stack']} "
        f"stack instructions, {g['hits']} hits, {g['overflow_rays']} rays whose stack "
        f"overflowed ({g['walkback_steps']} walk-back steps), {g['cpu_s']:.1f} s CPU.",
        "",
        "| build | latency / II | intersect (of them on pairs) | stack | mismatches | "
        "timing errors | hits as golden | counts as golden |",
        "|---|---|---|---|---|---|---|---|",
    ]
    speed = [
        "",
        "Speed: wall and CPU seconds of the loop (this process and the two driver processes), "
        "instructions (intersect + stack) per second, and where the CPU went: the golden models "
        "checking every output, the compiled RTL models (each driver process's CPU), and the "
        "rest (the loop, encoding, decoding and comparing the rows, the pipes).",
        "",
        "| build | wall s | CPU s | golden models CPU s (accel + stack) | RTL drivers CPU s "
        "(accel + stack) | rest CPU s | instructions / s | instructions / CPU-s | "
        "accelerator RTL: intersect / driver CPU-s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for b in sc["builds"]:
        both = b["intersect"] + b["stack"]
        mism = b["accel_report"][1] + b["stack_report"][1]
        timing = b["accel_report"][2] + b["stack_report"][2]
        same = b["same_hits"] and all(b["same_counts"].values())
        gold, drv = b["golden_cpu_s"], b["driver_cpu_s"]
        rest = b["python_cpu_s"] - gold["accel"] - gold["stack"]
        lines.append(
            f"| {b['label']} | {b['latency']} / {b['ii']} | {b['intersect']} "
            f"({b['pair_instructions']}) | {b['stack']} | "
            f"{mism} | {timing} | {'yes' if b['same_hits'] else 'NO'} | "
            f"{'yes' if all(b['same_counts'].values()) else 'NO'} |"
        )
        speed.append(
            f"| {b['label']} | {b['wall_s']:.1f} | {b['cpu_s']:.1f} | "
            f"{gold['accel'] + gold['stack']:.1f} ({gold['accel']:.1f} + {gold['stack']:.1f}) | "
            f"{drv['accel'] + drv['stack']:.1f} ({drv['accel']:.1f} + {drv['stack']:.1f}) | "
            f"{rest:.1f} | {_rate(both, b['wall_s'])} | {_rate(both, b['cpu_s'])} | "
            f"{_rate(b['intersect'], drv['accel'])} |"
        )
        rows.append(
            (
                f"{b['label']}: instructions, mismatches, hits and counts as golden, "
                "instructions/s (wall, CPU)",
                f"{both}, {mism}, {'yes' if same else 'NO'}, "
                f"{_rate(both, b['wall_s'])}, {_rate(both, b['cpu_s'])}",
            )
        )
    lines += speed
    lines += _sets_table(sc.get("sets", []), rows)
    lines.append("")
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    rows.insert(0, ("rays, scene", f"{sc['rays']}, {sc['scene']}"))
    return {"title": "Traversal at scale on the RTL", "rows": rows, "files": [str(summary)]}
