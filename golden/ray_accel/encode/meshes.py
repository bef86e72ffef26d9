"""Small closed triangle meshes generated in code (no downloads) for the triangle-path checks.

All meshes are consistently wound (counter-clockwise seen from outside, so the outward normal is
``(v1 - v0) x (v2 - v0)``) and closed: every edge is used by exactly two faces, once in each
direction (:func:`edge_faces` checks it). Vertices are float32.
"""

import numpy as np

__all__ = [
    "icosphere",
    "torus",
    "dyadic_box",
    "random_fan",
    "edge_faces",
    "vertex_faces",
    "face_normals",
    "edge_vertex_rays",
]


def icosphere(subdivisions=2, radius=1.0, center=(0.0, 0.0, 0.0)):
    """Subdivided icosahedron projected on a sphere: ``(vertices (V, 3) float32, faces (F, 3))``."""
    g = (1.0 + 5.0**0.5) / 2.0
    verts = [
        (-1, g, 0),
        (1, g, 0),
        (-1, -g, 0),
        (1, -g, 0),
        (0, -1, g),
        (0, 1, g),
        (0, -1, -g),
        (0, 1, -g),
        (g, 0, -1),
        (g, 0, 1),
        (-g, 0, -1),
        (-g, 0, 1),
    ]
    faces = [
        (0, 11, 5),
        (0, 5, 1),
        (0, 1, 7),
        (0, 7, 10),
        (0, 10, 11),
        (1, 5, 9),
        (5, 11, 4),
        (11, 10, 2),
        (10, 7, 6),
        (7, 1, 8),
        (3, 9, 4),
        (3, 4, 2),
        (3, 2, 6),
        (3, 6, 8),
        (3, 8, 9),
        (4, 9, 5),
        (2, 4, 11),
        (6, 2, 10),
        (8, 6, 7),
        (9, 8, 1),
    ]
    verts = [np.array(v, dtype=np.float64) / np.linalg.norm(v) for v in verts]
    for _ in range(subdivisions):
        cache, new_faces = {}, []

        def mid(i, j):
            key = (min(i, j), max(i, j))
            if key not in cache:
                m = verts[i] + verts[j]
                verts.append(m / np.linalg.norm(m))
                cache[key] = len(verts) - 1
            return cache[key]

        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new_faces += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new_faces
    v = np.array(verts) * radius + np.asarray(center, dtype=np.float64)
    return v.astype(np.float32), np.array(faces, dtype=np.int64)


def torus(major=2.0, minor=0.6, nu=24, nv=12, center=(0.0, 0.0, 0.0)):
    """Torus around the z axis: ``(vertices float32, faces)``."""
    u = np.arange(nu) * (2 * np.pi / nu)
    w = np.arange(nv) * (2 * np.pi / nv)
    uu, ww = np.meshgrid(u, w, indexing="ij")
    x = (major + minor * np.cos(ww)) * np.cos(uu)
    y = (major + minor * np.cos(ww)) * np.sin(uu)
    z = minor * np.sin(ww)
    v = np.stack([x, y, z], axis=-1).reshape(-1, 3) + np.asarray(center)
    faces = []
    for i in range(nu):
        for j in range(nv):
            a = i * nv + j
            b = ((i + 1) % nu) * nv + j
            c = ((i + 1) % nu) * nv + (j + 1) % nv
            d = i * nv + (j + 1) % nv
            faces += [(a, b, c), (a, c, d)]
    return v.astype(np.float32), np.array(faces, dtype=np.int64)


def dyadic_box(n=4, size=8, rng=None, jitter=0):
    """Closed surface of an axis-aligned cube ``[0, size]^3`` gridded ``n x n`` per face, with
    integer coordinates (so edge midpoints and vertices are exact in FP32). ``jitter`` > 0 moves the
    inner grid vertices by random integers (in units of ``size / (4 n)``) along the face normal
    (requires ``rng``), which makes the mesh non-planar while keeping exact coordinates."""
    step = size / n
    verts, index = [], {}

    def vid(p):
        key = tuple(p)
        if key not in index:
            index[key] = len(verts)
            verts.append(list(key))
        return index[key]

    faces = []
    for axis in range(3):
        for side in (0, 1):
            u_axis, v_axis = (axis + 1) % 3, (axis + 2) % 3
            grid = {}
            for i in range(n + 1):
                for j in range(n + 1):
                    p = [0.0, 0.0, 0.0]
                    p[axis] = side * size
                    p[u_axis] = i * step
                    p[v_axis] = j * step
                    grid[i, j] = vid(p)
            for i in range(n):
                for j in range(n):
                    a, b, c, d = grid[i, j], grid[i + 1, j], grid[i + 1, j + 1], grid[i, j + 1]
                    quad = [(a, b, c), (a, c, d)] if (i + j) % 2 == 0 else [(a, b, d), (b, c, d)]
                    if side == 0:
                        quad = [(x, z, y) for x, y, z in quad]
                    faces += quad
    v = np.array(verts, dtype=np.float64)
    if jitter:
        on_boundary = ((v == 0) | (v == size)).sum(axis=1) >= 2
        for k in np.nonzero(~on_boundary)[0]:
            axis = int(np.nonzero((v[k] == 0) | (v[k] == size))[0][0])
            outward = 1.0 if v[k, axis] == size else -1.0
            v[k, axis] += outward * rng.integers(-jitter, jitter + 1) * step / 4
    return v.astype(np.float32), np.array(faces, dtype=np.int64)


def random_fan(rng, spokes=7, radius=1.0, center=(0.0, 0.0, 0.0), height=0.3):
    """A closed "bipyramid" fan: a hub ring of ``spokes`` vertices around ``center`` and two apexes
    (a closed mesh in which every ring vertex and both apexes are shared by several faces)."""
    ang = np.sort(rng.uniform(0, 2 * np.pi, spokes))
    r = radius * rng.uniform(0.5, 1.0, spokes)
    ring = np.stack([r * np.cos(ang), r * np.sin(ang), rng.uniform(-height, height, spokes)], -1)
    top = np.array([[0, 0, radius]]) * rng.uniform(0.3, 1.0)
    bot = np.array([[0, 0, -radius]]) * rng.uniform(0.3, 1.0)
    v = np.concatenate([ring, top, bot]) + np.asarray(center)
    t, b = spokes, spokes + 1
    faces = []
    for k in range(spokes):
        n = (k + 1) % spokes
        faces += [(k, n, t), (n, k, b)]
    return v.astype(np.float32), np.array(faces, dtype=np.int64)


def edge_faces(faces):
    """``{(i, j): [faces using directed edge i->j]}``; raises ValueError unless the mesh is closed
    and consistently wound (each undirected edge used once in each direction)."""
    directed = {}
    for f, (a, b, c) in enumerate(np.asarray(faces).tolist()):
        for i, j in ((a, b), (b, c), (c, a)):
            directed.setdefault((i, j), []).append(f)
    for (i, j), fs in directed.items():
        if len(fs) != 1 or len(directed.get((j, i), [])) != 1:
            raise ValueError(f"edge {i}-{j} is not shared by exactly two consistently wound faces")
    return directed


def vertex_faces(faces):
    """``{vertex: [faces that use it]}``."""
    out = {}
    for f, tri in enumerate(np.asarray(faces).tolist()):
        for v in tri:
            out.setdefault(v, []).append(f)
    return out


def face_normals(v, f):
    v = v.astype(np.float64)
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    return n / np.linalg.norm(n, axis=1, keepdims=True)


def edge_vertex_rays(rng, v, f, *, per_edge=2, exact=False):
    """Rays aimed at shared edges and at shared vertices of a closed mesh.

    Returns (origins, dirs, candidate face lists). Directions see every candidate face from the
    same side (no silhouettes), so a watertight test must hit at least one candidate.
    With ``exact``, the aim points lie exactly on the edges (dyadic meshes) and the origins are
    exact too, so the rays pass exactly through the edges and vertices.
    """
    normals = face_normals(v, f)
    directed = edge_faces(f)
    rays = []
    for (i, j), (f1,) in directed.items():
        if i > j:
            continue
        f2 = directed[(j, i)][0]
        for _ in range(per_edge):
            for _attempt in range(20):
                d = -(normals[f1] + normals[f2]) + rng.normal(0, 0.35, 3)
                if exact:
                    d = np.round(d * 4)
                if np.all(normals[[f1, f2]] @ d < -0.05 * np.linalg.norm(d)):
                    break
            else:
                continue
            if exact:
                s = rng.choice([0.25, 0.5, 0.75])
            else:
                s = rng.uniform(0.05, 0.95)
            x = v[i].astype(np.float64) + s * (v[j].astype(np.float64) - v[i])
            rays.append((x, d, [f1, f2]))
    for vert, fs in vertex_faces(f).items():
        for _attempt in range(20):
            d = -normals[fs].sum(axis=0) + rng.normal(0, 0.2, 3)
            if exact:
                d = np.round(d * 4)
            if np.all(normals[fs] @ d < -0.02 * np.linalg.norm(d)):
                break
        else:
            continue
        rays.append((v[vert].astype(np.float64), d, list(fs)))
    origins, dirs, cands = [], [], []
    for x, d, fs in rays:
        x32 = x.astype(np.float32)
        if exact:
            o = x - 4 * d  # exact in float32 for small integers
            if not (
                np.array_equal(x32.astype(np.float64), x)
                and np.array_equal(o.astype(np.float32).astype(np.float64), o)
            ):
                raise ValueError("`exact` needs a mesh with small dyadic coordinates")
        else:
            o = x32.astype(np.float64) - 3.0 * d / np.linalg.norm(d)
        origins.append(o.astype(np.float32))
        dirs.append(d.astype(np.float32))
        cands.append(fs)
    return np.array(origins), np.array(dirs), cands
