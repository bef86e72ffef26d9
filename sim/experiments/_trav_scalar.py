"""The scalar per-wave traversal loop's helpers for the traversal experiment: scenes for the
loop (:class:`._trav_loop.Scene`), traces, per-ray means and the RTL replays (ray_accel and
ds_bvh_stack RTL in Amaranth's simulator, against the results the loop used)."""

import numpy as np

__all__ = ["build_scene", "per_ray", "rtl_replay", "stack_replay", "trace_all"]


def build_scene(name, geometry, mode):
    """:class:`._trav_loop.Scene` of a mesh or an instance list ``[(mesh, 3x4)]`` for a mode."""
    from gpurtl.golden.bvh import builder as B

    from ._trav_loop import Scene

    width = 8 if mode == "bvh8" else 4
    if isinstance(geometry, list):
        blas = {}
        inst = []
        for mesh, m in geometry:
            if id(mesh) not in blas:
                blas[id(mesh)] = B.build_bvh(mesh, width=8, obb_threshold=None)
            inst.append((blas[id(mesh)], m))
        return Scene(name, B.build_tlas(inst, obb_threshold=None), mode)
    return Scene(name, B.build_bvh(geometry, width=width, obb_threshold=None), mode)


def trace_all(scene, origins, dirs, stack_size, record=None):
    from ._trav_loop import trace_wave

    return [
        trace_wave(
            scene, origins[w : w + 32], dirs[w : w + 32], stack_size=stack_size, record=record
        )
        for w in range(0, len(origins), 32)
    ]


def per_ray(traces, ref=None):
    """Per-ray means of the counters; ``same_hits``: fraction of rays whose closest hit equals
    the reference traversal ``ref`` (when given)."""
    from ._trav_loop import COUNTERS

    rays = sum(len(tr.t) for tr in traces)
    out = {name: sum(int(tr.counts[name].sum()) for tr in traces) / rays for name in COUNTERS}
    out["lds_bytes"] = 4 * (out["pushes"] + out["pops"])
    out["overflow_rays"] = sum(int((tr.counts["overflows"] > 0).sum()) for tr in traces) / rays
    out["rays"] = rays
    slots = sum(tr.dual_slots for tr in traces)
    out["two_live"] = sum(tr.dual_live for tr in traces) / slots if slots else float("nan")
    if ref is not None:
        prim = np.concatenate([tr.prim for tr in traces])
        inst = np.concatenate([tr.inst for tr in traces])
        out["same_hits"] = float(((prim == ref.prim) & (inst == ref.inst)).mean())
    return out


def rtl_replay(buckets, limit):
    """Replay about ``limit`` intersect instructions, evenly spaced within each bucket (one per
    scene and mode), through the ``ray_accel`` RTL; ``(passed, failed, {kind: count})``."""
    per = max(1, limit // max(1, len(buckets)))
    records = [
        recs[k * len(recs) // per] for recs in buckets.values() for k in range(min(per, len(recs)))
    ]
    return _replay_instructions(records)


def _replay_instructions(records):
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    if not records:
        return None
    picks = records
    block = registry.get("ray_accel")
    params = block.resolve({})
    report = BACKENDS["pysim"].run(
        block, params, [i for i, _ in picks], expected=[o for _, o in picks]
    )
    kinds = {}
    for instr, _ in picks:
        if instr["dual"]:
            key = "dual " + "+".join(
                "empty" if p == 0x5 else "box" if p & 7 == 5 else "tri" for p in instr["node_ptr"]
            )
        else:
            key = (
                "bvh8 box"
                if instr["node_ptr"][0] & 0xF == 5
                else ("instance" if instr["node_ptr"][0] & 7 == 6 else "triangle pair")
            )
        kinds[key] = kinds.get(key, 0) + 1
    return report.passed, report.failed, kinds


def stack_replay(scenes, origins, dirs, *, stack_size=16, limit=None):
    """Replay the stack instructions of one wave per scene (in program order, the LDS carrying
    over) through the ``ds_bvh_stack`` RTL (Amaranth simulator, one build for all), expecting
    the results the loop used. ``limit``: at most that many instructions per scene (a prefix,
    which keeps the LDS contents consistent). Returns ``(passed, failed, {opcode: count})``."""
    from gpurtl.facts.ray_accel import INVALID_NODE
    from gpurtl.golden.ray_accel.ds_bvh_stack import unpack_stack_addr
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    from ._trav_loop import trace_wave

    requests, expected = [], []

    def record(request, response):
        new, dst = response
        dst0, dst1 = dst if isinstance(dst, tuple) else (dst, INVALID_NODE)
        requests.append(
            dict(request, stack_addr=unpack_stack_addr(request["stack_addr"]), tri_size_opt=0)
        )
        expected.append(
            {"stack_addr": unpack_stack_addr(new), "dst0": dst0, "dst1": dst1, "error": 0}
        )

    for scene in scenes:
        start = len(requests)
        trace_wave(scene, origins[:32], dirs[:32], stack_size=stack_size, stack_record=record)
        if limit is not None:
            del requests[start + limit :], expected[start + limit :]
    ops = {}
    for request in requests:
        name = {224: "push4_pop1", 225: "push8_pop1", 226: "push8_pop2"}[request["op"]]
        ops[name] = ops.get(name, 0) + 1
    block = registry.get("ds_bvh_stack")
    params = block.resolve({"stack_size": stack_size, "waves": 1, "lanes": 32})
    report = BACKENDS["pysim"].run(block, params, requests, expected=expected)
    return report.passed, report.failed, ops
