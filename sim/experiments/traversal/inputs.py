"""Your own scene, camera and rays for ``gpurtl experiment traversal`` (``--scene``, ``--camera``,
``--rays``), each checked before any work starts: a mistake is one line naming the file, the
line, the field and what was expected (``ValueError``; the command prints it and exits 2).

Formats (docs/traversal.md, "Your own scene and rays"):

``--scene PATH``
    A triangle mesh, ``.obj`` (``v x y z`` and ``f a b c ...`` lines; ``a/b/c`` forms, negative
    indices and polygons, fanned into triangles; other lines ignored) or ``.ply`` (ascii or
    binary, a ``vertex`` element with ``x y z`` and a ``face`` element with a list property),
    read by the package's own reader (:mod:`gpurtl.golden.bvh.mesh`; trimesh is not a core
    dependency). One BLAS.
``--camera EX,EY,EZ,TX,TY,TZ[,UX,UY,UZ[,FOV]]``
    Eye and target point; optional up vector (default ``0,1,0``) and horizontal field of view in
    degrees (default 45; between 1 and 170).
``--rays PATH``
    One ray a row: ``ox oy oz dx dy dz tmax`` (origin, direction, extent: the ray's ``t`` runs
    from 0 to ``tmax`` along the direction as given, not normalised), numbers separated by
    spaces or commas; empty lines and ``#`` comments ignored. At least 32 rays (one wave). They
    replace the camera rays; the shadow, ambient-occlusion and bounce sets start at their hits.
"""

import math
from pathlib import Path

import numpy as np

__all__ = ["CAMERA_FIELDS", "MIN_RAYS", "RAY_FIELDS", "parse_camera", "read_rays", "read_scene"]

#: The fields of a ``--camera`` value, in order.
CAMERA_FIELDS = ("eye x", "eye y", "eye z", "target x", "target y", "target z")
_CAMERA_MORE = ("up x", "up y", "up z", "field of view")
#: The fields of a ``--rays`` row, in order.
RAY_FIELDS = ("origin x", "origin y", "origin z", "direction x", "direction y", "direction z")
_RAY_ALL = (*RAY_FIELDS, "tmax")
#: Fewest rays a ``--rays`` file must hold: one wave.
MIN_RAYS = 32


def _number(text, where, field):
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: field {field} must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: field {field} must be a finite number, not {text!r}")
    return value


def _file(path, option):
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{option}: {path}: no such file")
    return p


def read_scene(path):
    """The :class:`~gpurtl.golden.bvh.mesh.Mesh` of an OBJ or PLY file (module doc string)."""
    from gpurtl.golden.bvh import mesh as M

    p = _file(path, "--scene")
    suffix = p.suffix.lower()
    if suffix == ".obj":
        mesh = _read_obj(p)
    elif suffix == ".ply":
        try:
            mesh = M.load_ply(p)
        except (ValueError, IndexError, KeyError, UnicodeDecodeError) as error:
            raise ValueError(
                f"--scene: {path}: not a PLY mesh with vertex x y z and face lists ({error})"
            ) from None
    else:
        raise ValueError(f"--scene: {path}: the file name must end in .obj or .ply, not {suffix!r}")
    if not len(mesh):
        raise ValueError(f"--scene: {path}: no triangles (expected at least one face)")
    if not np.isfinite(mesh.vertices).all():
        raise ValueError(f"--scene: {path}: vertex coordinates must be finite numbers")
    return mesh


def _read_obj(p):
    from gpurtl.golden.bvh.mesh import Mesh

    verts, faces = [], []
    text = p.read_text(errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split("#", 1)[0].split()
        where = f"--scene: {p}: line {number}"
        if not parts:
            continue
        if parts[0] == "v":
            if len(parts) < 4:
                raise ValueError(f"{where}: a vertex needs x y z, not {line.strip()!r}")
            verts.append([_number(t, where, n) for t, n in zip(parts[1:4], ("x", "y", "z"))])
        elif parts[0] == "f":
            if len(parts) < 4:
                raise ValueError(f"{where}: a face needs at least 3 vertex indices")
            idx = []
            for k, token in enumerate(parts[1:], 1):
                try:
                    i = int(token.split("/")[0])
                except ValueError:
                    raise ValueError(
                        f"{where}: field {k} of the face must be a vertex index, not {token!r}"
                    ) from None
                j = i - 1 if i > 0 else len(verts) + i
                if i == 0 or not 0 <= j < len(verts):
                    raise ValueError(
                        f"{where}: field {k} of the face must name one of the {len(verts)} "
                        f"vertices above it, not {token!r}"
                    )
                idx.append(j)
            faces += [[idx[0], idx[j], idx[j + 1]] for j in range(1, len(idx) - 1)]
    return Mesh(np.array(verts, np.float32).reshape(-1, 3), np.array(faces, np.int64))


def parse_camera(text):
    """``(eye, target, up, half)`` of a ``--camera`` value (``half``: tan of half the field of
    view)."""
    parts = [t.strip() for t in text.split(",")]
    if len(parts) not in (6, 9, 10):
        raise ValueError(
            f"--camera must be 6, 9 or 10 comma-separated numbers "
            f"({', '.join(CAMERA_FIELDS + _CAMERA_MORE)}), not {len(parts)}: {text!r}"
        )
    names = CAMERA_FIELDS + _CAMERA_MORE
    vals = [_number(t, "--camera", f"{k + 1} ({names[k]})") for k, t in enumerate(parts)]
    eye, target = np.array(vals[:3]), np.array(vals[3:6])
    up = np.array(vals[6:9]) if len(vals) >= 9 else np.array([0.0, 1.0, 0.0])
    fov = vals[9] if len(vals) == 10 else 45.0
    if not 1.0 <= fov <= 170.0:
        raise ValueError(f"--camera: field 10 (field of view) must be 1 to 170 degrees, not {fov}")
    forward = target - eye
    if np.linalg.norm(forward) == 0:
        raise ValueError("--camera: the target must differ from the eye")
    if np.linalg.norm(np.cross(forward, up)) <= 1e-9 * np.linalg.norm(forward) * max(
        np.linalg.norm(up), 1e-300
    ):
        raise ValueError("--camera: the up vector must not be zero or parallel to the view")
    return eye, target, up, math.tan(math.radians(fov) / 2)


def read_rays(path):
    """``(origins, dirs, tmax)`` (float64 arrays) of a ``--rays`` file (module doc string)."""
    p = _file(path, "--rays")
    rows = []
    for number, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        body = line.split("#", 1)[0].replace(",", " ").split()
        if not body:
            continue
        where = f"--rays: {p}: line {number}"
        if len(body) != len(_RAY_ALL):
            raise ValueError(
                f"{where}: a ray must be 7 numbers ({', '.join(_RAY_ALL)}), not {len(body)}"
            )
        row = [_number(t, where, f"{k + 1} ({_RAY_ALL[k]})") for k, t in enumerate(body)]
        if not any(row[3:6]):
            raise ValueError(f"{where}: fields 4-6 (direction) must not all be zero")
        if row[6] <= 0:
            raise ValueError(f"{where}: field 7 (tmax) must be a positive number, not {body[6]!r}")
        rows.append(row)
    if len(rows) < MIN_RAYS:
        raise ValueError(
            f"--rays: {p}: {len(rows)} rays; the run needs at least {MIN_RAYS} (one wave)"
        )
    a = np.array(rows, np.float64)
    return a[:, :3], a[:, 3:6], a[:, 6]
