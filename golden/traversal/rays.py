"""Rays of the traversal runs: camera rays in 8x4 tiles (one wave per tile, as a 2-D
ray-generation dispatch assigns them), shadow rays towards a point light, ambient-occlusion
rays and diffuse bounces, all from the hit points in pixel order; and rays from a sphere around
a mesh at its triangles (:func:`sphere_rays`, the ``obb`` experiment's and the RTL loop's)."""

import numpy as np

__all__ = ["Camera", "bounce_rays", "camera_rays", "hit_frame", "shadow_rays", "sphere_rays"]


class Camera:
    """A pinhole camera: ``eye``, orthonormal ``right``/``up``/``forward`` and ``half`` (tan of
    half the horizontal field of view)."""

    def __init__(self, eye, target, up, half):
        self.eye = np.asarray(eye, np.float64)
        f = np.asarray(target, np.float64) - self.eye
        self.forward = f / np.linalg.norm(f)
        r = np.cross(self.forward, up)
        self.right = r / np.linalg.norm(r)
        self.up = np.cross(self.right, self.forward)
        self.half = half


def camera_rays(cam, width, height):
    """``(origins, dirs, pixel)``: one ray per pixel through its centre, ordered in 8x4 tiles;
    ``pixel`` is the flat row-major pixel index of each ray."""
    ty, tx, y, x = np.meshgrid(
        np.arange(0, height, 4), np.arange(0, width, 8), np.arange(4), np.arange(8), indexing="ij"
    )
    px, py = (tx + x).ravel(), (ty + y).ravel()
    keep = (px < width) & (py < height)
    px, py = px[keep], py[keep]
    u = ((px + 0.5) / width * 2 - 1) * cam.half
    v = (1 - (py + 0.5) / height * 2) * cam.half * height / width
    dirs = cam.forward + u[:, None] * cam.right + v[:, None] * cam.up
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    return np.repeat(cam.eye[None, :], len(px), axis=0), dirs, py * width + px


def hit_frame(world_tris, origins, dirs, t, key):
    """Hit points, geometric normals facing the incoming ray, of the rays with a hit
    (``key``: index into ``world_tris`` (n, 3, 3), -1 for misses)."""
    ok = key >= 0
    tri = world_tris[key[ok]]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-30)
    n *= -np.sign(np.einsum("ij,ij->i", n, dirs[ok]))[:, None]
    return ok, origins[ok] + dirs[ok] * t[ok, None], n


def shadow_rays(points, normals, light, eps):
    """Rays from the hit points to ``light`` (direction = the full segment, extent 1)."""
    o = points + normals * eps
    return o, light[None, :] - o


def bounce_rays(points, normals, eps, rng):
    """Cosine-weighted directions about the normals (diffuse bounces and AO rays)."""
    u = rng.normal(size=normals.shape)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    d = normals + u
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-30)
    return points + normals * eps, d


def sphere_rays(mesh, n, seed):
    """Rays from a sphere around the mesh towards random points on random triangles."""
    rng = np.random.default_rng(seed)
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    center, radius = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    origins = center + u * radius
    tris = mesh.triangles.astype(np.float64)[rng.integers(0, len(mesh), n)]
    w = rng.dirichlet((1, 1, 1), n)
    targets = np.einsum("nk,nkj->nj", w, tris)
    # a third of the rays aim next to the geometry (they test the box fit, not the triangles)
    jitter = rng.normal(0, 0.02 * radius, (n, 3)) * (rng.random((n, 1)) < 0.33)
    return origins, targets + jitter - origins
