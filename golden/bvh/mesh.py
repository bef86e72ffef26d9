"""Triangle meshes: a small OBJ / PLY reader and writer, and the procedural test scenes.

Only what a BVH builder needs is read: vertex positions and (triangulated) faces. OBJ: ``v`` and
``f`` lines (``f a/b/c ...`` forms, negative indices, polygons fanned into triangles); everything
else is ignored. PLY: ``ascii`` and ``binary_little_endian`` / ``binary_big_endian`` formats
with a ``vertex`` element (``x``, ``y``, ``z`` among any other properties) and a ``face`` element
with a list property (``vertex_indices`` or ``vertex_index``).

Scenes (all in float32, deterministic from a seed): :func:`rods` (thin boxes at many angles),
:func:`chains` (hanging chains of thin links), :func:`chandelier` (a ring of arms with four
support chains of different rotations, after the Elden Ring example of Chips and Cheese, "RDNA 4's
Raytracing Improvements", 2025), and
:func:`knot_mesh` (a closed torus-knot tube, a smooth organic mesh), and :func:`terrain` (a
fractal height field with boulders, 51,968 triangles by default: the large scene of the default
runs without the optional scenes extra).

A real scanned mesh ships with the package: :func:`bunny`, the Stanford Bunny at reconstruction
resolution 4 (453 vertices; Stanford 3D Scanning Repository, Stanford University Computer Graphics
Laboratory), read from ``bunny_res4.ply`` beside this module with the PLY reader.
"""

import pathlib

import numpy as np

__all__ = [
    "Mesh",
    "load_mesh",
    "load_obj",
    "load_ply",
    "save_obj",
    "save_ply",
    "merge",
    "box_mesh",
    "rods",
    "chains",
    "chandelier",
    "knot_mesh",
    "rotation_matrix",
    "terrain",
    "bunny",
    "BUNNY_PATH",
]

#: The packaged Stanford Bunny (reconstruction resolution 4), ascii PLY.
BUNNY_PATH = pathlib.Path(__file__).parent / "bunny_res4.ply"


class Mesh:
    """``vertices`` float32 (V, 3) and ``faces`` int64 (F, 3) (vertex indices, 0-based)."""

    def __init__(self, vertices, faces):
        self.vertices = np.ascontiguousarray(vertices, dtype=np.float32).reshape(-1, 3)
        self.faces = np.ascontiguousarray(faces, dtype=np.int64).reshape(-1, 3)
        if len(self.faces) and (self.faces.min() < 0 or self.faces.max() >= len(self.vertices)):
            raise ValueError("face indices must name existing vertices")

    @property
    def triangles(self):
        """(F, 3, 3) float32 corner positions."""
        return self.vertices[self.faces]

    def transformed(self, matrix):
        """This mesh under a 3x4 (or 4x4) affine matrix."""
        m = np.asarray(matrix, dtype=np.float64)
        v = self.vertices.astype(np.float64) @ m[:3, :3].T + m[:3, 3]
        return Mesh(v, self.faces)

    def __len__(self):
        return len(self.faces)


def merge(meshes):
    """One mesh holding all of ``meshes``."""
    verts, faces, base = [], [], 0
    for mesh in meshes:
        verts.append(mesh.vertices)
        faces.append(mesh.faces + base)
        base += len(mesh.vertices)
    return Mesh(np.concatenate(verts), np.concatenate(faces))


# --- OBJ -------------------------------------------------------------------------------------------


def load_obj(path):
    """Read an OBJ file (positions and faces only)."""
    verts, faces = [], []
    for line in pathlib.Path(path).read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            verts.append([float(x) for x in parts[1:4]])
        elif parts[0] == "f":
            idx = []
            for token in parts[1:]:
                k = int(token.split("/")[0])
                idx.append(k - 1 if k > 0 else len(verts) + k)
            for j in range(1, len(idx) - 1):
                faces.append([idx[0], idx[j], idx[j + 1]])
    return Mesh(np.array(verts, dtype=np.float32), np.array(faces, dtype=np.int64))


def save_obj(mesh, path):
    """Write ``mesh`` as an OBJ file (exact float32 values via ``repr``)."""
    lines = [f"v {float(x)!r} {float(y)!r} {float(z)!r}" for x, y, z in mesh.vertices]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in mesh.faces]
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


# --- PLY -------------------------------------------------------------------------------------------

_PLY_TYPES = {
    "char": "i1",
    "int8": "i1",
    "uchar": "u1",
    "uint8": "u1",
    "short": "i2",
    "int16": "i2",
    "ushort": "u2",
    "uint16": "u2",
    "int": "i4",
    "int32": "i4",
    "uint": "u4",
    "uint32": "u4",
    "float": "f4",
    "float32": "f4",
    "double": "f8",
    "float64": "f8",
}


def load_ply(path):
    """Read a PLY file (ascii or binary) with ``vertex`` and ``face`` elements."""
    raw = pathlib.Path(path).read_bytes()
    end = raw.index(b"end_header")
    end = raw.index(b"\n", end) + 1
    header = raw[:end].decode("ascii").splitlines()
    if header[0].strip() != "ply":
        raise ValueError("not a PLY file")
    fmt, elements = None, []
    for line in header[1:]:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "format":
            fmt = parts[1]
        elif parts[0] == "element":
            elements.append({"name": parts[1], "count": int(parts[2]), "props": []})
        elif parts[0] == "property":
            if parts[1] == "list":
                elements[-1]["props"].append((parts[4], "list", parts[2], parts[3]))
            else:
                elements[-1]["props"].append((parts[2], parts[1]))
    body = raw[end:]
    verts = faces = None
    if fmt == "ascii":
        tokens = body.split()
        pos = 0
        for el in elements:
            rows = []
            for _ in range(el["count"]):
                row = {}
                for prop in el["props"]:
                    if prop[1] == "list":
                        n = int(tokens[pos])
                        row[prop[0]] = [int(t) for t in tokens[pos + 1 : pos + 1 + n]]
                        pos += 1 + n
                    else:
                        row[prop[0]] = float(tokens[pos])
                        pos += 1
                rows.append(row)
            if el["name"] == "vertex":
                verts = [[r["x"], r["y"], r["z"]] for r in rows]
            elif el["name"] == "face":
                faces = [r.get("vertex_indices", r.get("vertex_index")) for r in rows]
    elif fmt in ("binary_little_endian", "binary_big_endian"):
        endian = "<" if fmt == "binary_little_endian" else ">"
        pos = 0
        for el in elements:
            if all(p[1] != "list" for p in el["props"]):
                dtype = np.dtype([(p[0], endian + _PLY_TYPES[p[1]]) for p in el["props"]])
                arr = np.frombuffer(body, dtype=dtype, count=el["count"], offset=pos)
                pos += dtype.itemsize * el["count"]
                if el["name"] == "vertex":
                    verts = np.stack([arr["x"], arr["y"], arr["z"]], axis=1)
                continue
            rows = []
            for _ in range(el["count"]):
                row = {}
                for prop in el["props"]:
                    if prop[1] == "list":
                        ct = np.dtype(endian + _PLY_TYPES[prop[2]])
                        it = np.dtype(endian + _PLY_TYPES[prop[3]])
                        n = int(np.frombuffer(body, ct, 1, pos)[0])
                        pos += ct.itemsize
                        row[prop[0]] = np.frombuffer(body, it, n, pos).tolist()
                        pos += it.itemsize * n
                    else:
                        t = np.dtype(endian + _PLY_TYPES[prop[1]])
                        row[prop[0]] = np.frombuffer(body, t, 1, pos)[0]
                        pos += t.itemsize
                rows.append(row)
            if el["name"] == "face":
                faces = [r.get("vertex_indices", r.get("vertex_index")) for r in rows]
            elif el["name"] == "vertex":
                verts = [[r["x"], r["y"], r["z"]] for r in rows]
    else:
        raise ValueError(f"unsupported PLY format {fmt!r}")
    if verts is None or faces is None:
        raise ValueError("a PLY mesh needs `vertex` and `face` elements")
    tris = [[f[0], f[j], f[j + 1]] for f in faces for j in range(1, len(f) - 1)]
    return Mesh(np.asarray(verts, dtype=np.float32), np.asarray(tris, dtype=np.int64))


def save_ply(mesh, path, *, binary=True):
    """Write ``mesh`` as PLY (binary little endian by default, or ascii)."""
    head = [
        "ply",
        f"format {'binary_little_endian' if binary else 'ascii'} 1.0",
        f"element vertex {len(mesh.vertices)}",
        "property float x",
        "property float y",
        "property float z",
        f"element face {len(mesh.faces)}",
        "property list uchar int vertex_indices",
        "end_header",
    ]
    text = ("\n".join(head) + "\n").encode("ascii")
    if binary:
        faces = np.zeros(len(mesh.faces), dtype=[("n", "u1"), ("i", "<i4", 3)])
        faces["n"] = 3
        faces["i"] = mesh.faces
        body = mesh.vertices.astype("<f4").tobytes() + faces.tobytes()
    else:
        lines = [" ".join(repr(float(x)) for x in v) for v in mesh.vertices]
        lines += [f"3 {a} {b} {c}" for a, b, c in mesh.faces]
        body = ("\n".join(lines) + "\n").encode("ascii")
    pathlib.Path(path).write_bytes(text + body)


def load_mesh(path):
    """OBJ or PLY by file suffix."""
    suffix = pathlib.Path(path).suffix.lower()
    if suffix == ".obj":
        return load_obj(path)
    if suffix == ".ply":
        return load_ply(path)
    raise ValueError(f"unknown mesh format {suffix!r} (expected .obj or .ply)")


def bunny():
    """The Stanford Bunny (res 4) from the packaged PLY file: 453 vertices, 907 triangles.

    The scan lists 39 of its 946 triangles twice (same three vertices); the copies are dropped,
    keeping the first, so that a closest-hit has one answer. The mesh is open at its base."""
    mesh = load_ply(BUNNY_PATH)
    _, first = np.unique(np.sort(mesh.faces, axis=1), axis=0, return_index=True)
    return Mesh(mesh.vertices, mesh.faces[np.sort(first)])


# --- procedural scenes -----------------------------------------------------------------------------


def rotation_matrix(axis, angle):
    """3x3 rotation by ``angle`` (radians) about ``axis`` (Rodrigues)."""
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


_BOX_FACES = np.array(
    [
        [0, 1, 3],
        [0, 3, 2],
        [4, 6, 7],
        [4, 7, 5],
        [0, 4, 5],
        [0, 5, 1],
        [2, 3, 7],
        [2, 7, 6],
        [0, 2, 6],
        [0, 6, 4],
        [1, 5, 7],
        [1, 7, 3],
    ]
)


def box_mesh(half, rotation=None, center=(0, 0, 0)):
    """A closed box (12 triangles) with half extents ``half``, rotated and moved."""
    corners = np.array(
        [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64
    ) * np.asarray(half, dtype=np.float64)
    rotation = np.eye(3) if rotation is None else np.asarray(rotation)
    return Mesh(corners @ rotation.T + np.asarray(center), _BOX_FACES)


def rods(count=64, *, seed=0, length=4.0, radius=0.04, spread=10.0):
    """Thin rods (long boxes) with random orientations and positions."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(count):
        axis = rng.normal(size=3)
        rot = rotation_matrix(axis, rng.uniform(0, np.pi))
        parts.append(box_mesh((length / 2, radius, radius), rot, rng.uniform(-spread, spread, 3)))
    return merge(parts)


def _chain(start, direction, links, link_len=0.3, thick=0.02, twist=np.pi / 2):
    """A chain of thin rectangular links along ``direction`` from ``start``."""
    d = np.asarray(direction, dtype=np.float64)
    d /= np.linalg.norm(d)
    # frame with x along the chain
    helper = np.array([0, 0, 1.0]) if abs(d[2]) < 0.9 else np.array([1.0, 0, 0])
    u = np.cross(d, helper)
    u /= np.linalg.norm(u)
    w = np.cross(d, u)
    base = np.stack([d, u, w], axis=1)
    parts = []
    for k in range(links):
        center = np.asarray(start) + d * link_len * (k + 0.5) * 0.8
        spin = rotation_matrix((1, 0, 0), twist * k)
        rot = base @ spin
        for side in (-1, 1):  # two long bars of the link
            offset = rot @ np.array([0, side * link_len * 0.15, 0])
            parts.append(box_mesh((link_len / 2, thick, thick), rot, center + offset))
        for end in (-1, 1):  # two short ends
            offset = rot @ np.array([end * link_len / 2, 0, 0])
            parts.append(box_mesh((thick, link_len * 0.15, thick), rot, center + offset))
    return merge(parts)


def chains(count=12, *, seed=0, links=10, spread=6.0):
    """Chains hanging at many angles (the Elden Ring "chains hanging from the ceiling" of Chips
    and Cheese, "RDNA 4's Raytracing Improvements")."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(count):
        tilt = rng.uniform(0.2, 1.2)
        yaw = rng.uniform(0, 2 * np.pi)
        direction = (np.sin(tilt) * np.cos(yaw), np.sin(tilt) * np.sin(yaw), -np.cos(tilt))
        start = (rng.uniform(-spread, spread), rng.uniform(-spread, spread), 4.0)
        parts.append(_chain(start, direction, links))
    return merge(parts)


def chandelier(arms=8, *, links=12, radius=3.0, drop=4.0):
    """A chandelier: a ring of arms (thin rods) hung from a point by four support chains, each
    with a different rotation (the chandelier example of the same article)."""
    parts = []
    top = np.array([0.0, 0.0, drop])
    ring_z = 0.0
    for k in range(4):
        ang = k * np.pi / 2 + np.pi / 4
        anchor = np.array([radius * np.cos(ang), radius * np.sin(ang), ring_z])
        parts.append(
            _chain(top, anchor - top, links, link_len=np.linalg.norm(anchor - top) / links / 0.8)
        )
    for k in range(arms):
        ang = 2 * np.pi * k / arms
        rot = rotation_matrix((0, 0, 1), ang) @ rotation_matrix((0, 1, 0), -0.3)
        center = np.array([radius * 0.6 * np.cos(ang), radius * 0.6 * np.sin(ang), ring_z])
        parts.append(box_mesh((radius * 0.55, 0.05, 0.05), rot, center))
        candle = center + rotation_matrix((0, 0, 1), ang) @ np.array([radius * 0.55, 0, 0.35])
        parts.append(box_mesh((0.06, 0.06, 0.3), np.eye(3), candle))
    return merge(parts)


def knot_mesh(p=2, q=3, *, segments=240, sides=10, tube=0.25):
    """A (p, q) torus-knot tube: a smooth closed mesh with long thin diagonal parts."""
    t = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    r = 2 + np.cos(q * t)
    curve = np.stack([r * np.cos(p * t), r * np.sin(p * t), np.sin(q * t)], axis=1) * 2.0
    tangent = np.roll(curve, -1, axis=0) - np.roll(curve, 1, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    normal = np.cross(tangent, [0, 0, 1.0])
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    binormal = np.cross(tangent, normal)
    phi = np.linspace(0, 2 * np.pi, sides, endpoint=False)
    verts = curve[:, None, :] + tube * (
        np.cos(phi)[None, :, None] * normal[:, None, :]
        + np.sin(phi)[None, :, None] * binormal[:, None, :]
    )
    verts = verts.reshape(-1, 3)
    faces = []
    for i in range(segments):
        for j in range(sides):
            a = i * sides + j
            b = ((i + 1) % segments) * sides + j
            c = ((i + 1) % segments) * sides + (j + 1) % sides
            d = i * sides + (j + 1) % sides
            faces += [[a, b, c], [a, c, d]]
    return Mesh(verts, np.array(faces))


def _lattice(ix, iy, octave):
    """A value in [0, 1) for each integer lattice point: a 64-bit integer hash (splitmix64's
    finalizer), so the terrain is the same on every machine and numpy version."""
    h = (ix.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (
        iy.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(octave)
    )
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _value_noise(x, y, octave):
    """Smoothly interpolated lattice values at real points ``(x, y)``."""
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    fx, fy = fx * fx * (3 - 2 * fx), fy * fy * (3 - 2 * fy)
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    v00 = _lattice(x0, y0, octave)
    v10 = _lattice(x0 + 1, y0, octave)
    v01 = _lattice(x0, y0 + 1, octave)
    v11 = _lattice(x0 + 1, y0 + 1, octave)
    return (v00 * (1 - fx) + v10 * fx) * (1 - fy) + (v01 * (1 - fx) + v11 * fx) * fy


def terrain(cells=160, *, boulders=64, size=100.0, height=18.0, octaves=5):
    """A procedural landscape, z up: a fractal height field of ``cells`` x ``cells`` squares
    (two triangles each) over ``size`` x ``size`` units, and ``boulders`` rotated boxes resting
    on it (12 triangles each). Deterministic: no random generator, only an integer hash of the
    lattice points (the same mesh on every machine). The default has 160 x 160 x 2 + 64 x 12 =
    51,968 triangles, the large scene of the runs without ``gpurtl[scenes]``."""
    n = cells + 1
    g = np.linspace(0.0, 1.0, n)
    x, y = np.meshgrid(g, g, indexing="ij")
    z = np.zeros_like(x)
    for k in range(octaves):
        freq = 4.0 * 2**k
        z += _value_noise(x * freq, y * freq, k) / 2**k
    z = height * (z / z.max()) ** 2  # valleys flatter than peaks
    verts = np.stack([(x - 0.5) * size, (y - 0.5) * size, z], axis=-1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
    a = (i * n + j).ravel()
    b, c, d = a + n, a + 1, a + n + 1
    faces = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)])
    parts = [Mesh(verts, faces)]
    for k in range(boulders):
        u = _lattice(np.array([k]), np.array([7]), 101)[0]
        v = _lattice(np.array([k]), np.array([11]), 103)[0]
        w = _lattice(np.array([k]), np.array([13]), 107)[0]
        ci, cj = int(u * (cells - 1)), int(v * (cells - 1))
        ground = verts[ci * n + cj]
        half = size / cells * (0.6 + 2.4 * w) * np.array([1.0, 0.7, 0.5])
        rot = rotation_matrix((u - 0.5, v - 0.5, 1.0), 6.283 * w)
        parts.append(box_mesh(half, rot, ground + np.array([0, 0, half[2] * 0.6])))
    return merge(parts)
