"""The traversal runs' scenes: the real scenes of the optional extra ``gpurtl[scenes]`` or
the packaged ones, their BVH8 builds, world triangles, cameras and the ray sets derived from a
set's hits (shadow, ambient occlusion, diffuse bounces)."""

import numpy as np

__all__ = [
    "TERRAIN_NAME",
    "build",
    "camera",
    "deriver",
    "hit_key",
    "scale_sets",
    "scenes",
    "tlas_stats",
    "warn",
    "world_tris",
]


#: The large scene of the default run without the optional scenes: a deterministic procedural
#: landscape (:func:`gpurtl.golden.bvh.mesh.terrain`).
TERRAIN_NAME = "terrain (51968 tris)"


def scenes(quick, notes, warn=None):
    """``[(name, kind, geometry, up axis)]``. Without the optional scenes (``gpurtl[scenes]``)
    the default run uses the generated terrain (instead of the Stanford Bunny) and the packaged
    bunny (instanced, instead of San Francisco) and says so in one line (``notes`` and
    ``warn``)."""
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.bvh import scenes as S

    small = M.bunny()
    small_inst = [
        (small, np.hstack([M.rotation_matrix((0, 1, 0), 0.9 * k), [[0.17 * k], [0.0], [0.0]]]))
        for k in range(3)
    ]
    if quick:
        return [("bunny (907 tris)", "blas", small, 1), ("3 bunnies", "tlas", small_inst, 1)]
    out, missing, instead = [], [], []
    try:
        out.append(("Stanford Bunny", "blas", S.stanford_bunny(), 1))
    except S.SceneUnavailable as error:
        missing.append(error)
        instead.append(f"the generated {TERRAIN_NAME}")
        out.append((TERRAIN_NAME, "blas", M.terrain(), 2))
    try:
        out.append(("San Francisco", "tlas", S.sionna_city("san_francisco"), 2))
    except S.SceneUnavailable as error:
        missing.append(error)
        instead.append("3 instanced copies of the packaged bunny")
        out.append(("3 bunnies", "tlas", small_inst, 1))
    if missing:
        if all(e.package for e in missing):
            why = f"need {' and '.join(f'`{e.package}`' for e in missing)}: {S.SCENES_EXTRA}"
        else:
            why = "; ".join(str(e) for e in missing)
        note = f"the real scenes {why}; running on {' and '.join(instead)} instead"
        notes.append(note)
        if warn is not None:
            warn(note)
    return out


def warn(line):
    from ...core.progress import progress

    progress(line)


def build(kind, geometry):
    from gpurtl.golden.bvh import wide as W

    if kind == "blas":
        return W.build_wide(geometry, width=8, leaf_pairs=4)
    return W.build_wide_tlas(geometry, leaf_pairs=4)


def world_tris(kind, geometry, top):
    """World triangles (n, 3, 3) and the base index of each instance (TLAS)."""
    if kind == "blas":
        return geometry.triangles.astype(np.float64), None
    tris, base, k = [], [], 0
    for mesh, m in geometry:
        m = np.asarray(m, np.float64)
        tris.append(mesh.triangles.astype(np.float64) @ m[:3, :3].T + m[:3, 3])
        base.append(k)
        k += len(mesh)
    return np.concatenate(tris), np.array(base, np.int64)


def camera(world_tris, up_axis, quick):
    from gpurtl.golden.traversal.rays import Camera

    lo, hi = world_tris.reshape(-1, 3).min(axis=0), world_tris.reshape(-1, 3).max(axis=0)
    center, ext = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    up = np.eye(3)[up_axis]
    if up_axis == 1:  # an object: from the front, a little above
        eye = center + np.array([0.25, 0.2, 1.0]) / np.linalg.norm([0.25, 0.2, 1.0]) * 1.3 * ext
        return Camera(eye, center, up, 0.42), center, ext
    # a city: from above the south-west edge, looking at the centre
    eye = center + np.array([-0.35, -0.35, 0.45]) * ext
    return Camera(eye, center, up, 0.75), center, ext


def hit_key(res, base):
    if base is None:
        return np.where(res.prim >= 0, res.prim, -1)
    return np.where(res.prim >= 0, base[np.maximum(res.inst, 0)] + res.prim, -1)


def deriver(world_tris, base, center, ext, up_axis):
    """``derive(set_name, result, origins, dirs)`` of a scene: the ray sets that start at the
    hits of set ``set_name`` (``{name: (origins, dirs, tmax, first_hit)}``: shadow rays to the
    point light (extent 1: the whole segment), AO rays (extent a tenth of the scene's size) and
    the first diffuse bounce from the camera rays' hits, the second bounce from the first's) and
    the hit frame ``(ok, points, normals)``. Random directions come from one generator per scene
    (seed 7), drawn in the order of the sets."""
    from gpurtl.golden.traversal.rays import bounce_rays, hit_frame, shadow_rays

    light = center + np.eye(3)[up_axis] * 0.9 * ext + np.array([0.3, 0.3, 0.3]) * ext * 0.3
    eps = 1e-4 * ext
    rng = np.random.default_rng(7)

    def derive(set_name, res, o, d):
        ok, pts, nrm = hit_frame(world_tris, o, d, res.t, hit_key(res, base))
        new = {}
        if set_name == "camera":
            so, sd = shadow_rays(pts, nrm, light, eps)
            new["shadow"] = (so, sd, np.ones(len(so)), True)
            ao, ad = bounce_rays(pts, nrm, eps, rng)
            new["ao"] = (ao, ad, np.full(len(ao), 0.1 * ext), True)
            bo, bd = bounce_rays(pts, nrm, eps, rng)
            new["diffuse1"] = (bo, bd, None, False)
        elif set_name == "diffuse1":
            bo, bd = bounce_rays(pts, nrm, eps, rng)
            new["diffuse2"] = (bo, bd, None, False)
        return new, (ok, pts, nrm)

    return derive


def scale_sets(world_tris):
    """The ``derive`` of :func:`_deriver` for the ``--rtl-scale`` run's object scene (its ray
    sets only)."""
    _, center, ext = camera(world_tris, 1, False)
    derive = deriver(world_tris, None, center, ext, 1)
    return lambda set_name, res, o, d: derive(set_name, res, o, d)[0]


def tlas_stats(top):
    fill = [len(b.children) for b in top.boxes]
    return {
        "box_nodes": len(top.boxes),
        "leaves": len(top.leaves),
        "mean_children": float(np.mean(fill)),
        "sah_cost": float(getattr(top, "sah_cost", float("nan"))),
    }
