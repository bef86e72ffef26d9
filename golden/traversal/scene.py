"""Scenes for the per-wave loop (:class:`.loop.Scene`) from a mesh or an instance list, whole
traces of many waves, and per-ray means of the loop's counters."""

import numpy as np

from .loop import COUNTERS, Scene, trace_wave

__all__ = ["build_scene", "per_ray", "trace_all"]


def build_scene(name, geometry, mode):
    """:class:`.loop.Scene` of a mesh or an instance list ``[(mesh, 3x4)]`` for a mode."""
    from gpurtl.golden.bvh import builder as B

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
    """:func:`.loop.trace_wave` of every wave of 32 consecutive rays."""
    return [
        trace_wave(
            scene, origins[w : w + 32], dirs[w : w + 32], stack_size=stack_size, record=record
        )
        for w in range(0, len(origins), 32)
    ]


def per_ray(traces, ref=None):
    """Per-ray means of the counters; ``same_hits``: fraction of rays whose closest hit equals
    the reference traversal ``ref`` (when given)."""
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
