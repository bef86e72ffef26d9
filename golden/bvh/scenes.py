"""Real scenes read from installed Python packages (never downloaded at run time).

* :func:`stanford_bunny` -- the Stanford Bunny (Stanford 3D Scanning Repository, Stanford
  University Computer Graphics Laboratory) as MeshLab ships it in the ``pymeshlab`` wheel's test
  data (``pymeshlab/tests/sample_meshes/bunny.obj``: 28,088 vertices, 56,172 triangles; the
  repository's own ``bun_zipper.ply`` reconstruction has 35,947 vertices and 69,451 triangles).
* :func:`sionna_city` -- a city scene of the ``sionna-rt`` wheel (``sionna/rt/scenes/<name>``: a
  Mitsuba XML file listing one PLY mesh per building part; San Francisco has 4,735 meshes). Each
  mesh becomes one instance: its vertices moved to an object space whose origin is the mesh's
  bounding-box minimum, the instance transform the translation back, and meshes equal in object
  space (same faces, same vertex bits) share one BLAS.

Both packages are the optional extra ``gpurtl[scenes]``; a missing one raises
:class:`SceneUnavailable` with a one-line message.
"""

import importlib.metadata
import pathlib
import re

import numpy as np

from .mesh import Mesh, load_obj, load_ply

__all__ = ["SCENES_EXTRA", "SceneUnavailable", "sionna_city", "stanford_bunny"]

SCENES_EXTRA = "pip install 'gpurtl[scenes]'"


class SceneUnavailable(RuntimeError):
    """An optional scene's package is not installed (``package``: its name) or lacks the file
    (``package`` None)."""

    def __init__(self, message, package=None):
        super().__init__(message)
        self.package = package


def _package_file(dist, path):
    try:
        located = pathlib.Path(importlib.metadata.distribution(dist).locate_file(path))
    except importlib.metadata.PackageNotFoundError:
        raise SceneUnavailable(
            f"scene data needs the `{dist}` package ({SCENES_EXTRA})", package=dist
        ) from None
    if not located.exists():
        raise SceneUnavailable(f"`{dist}` is installed but has no `{path}`")
    return located


def stanford_bunny():
    """The 56,172-triangle Stanford Bunny from the ``pymeshlab`` wheel."""
    mesh = load_obj(_package_file("pymeshlab", "pymeshlab/tests/sample_meshes/bunny.obj"))
    # the OBJ uses `f a//n` faces; drop repeated triangles so a closest hit has one answer
    _, first = np.unique(np.sort(mesh.faces, axis=1), axis=0, return_index=True)
    return Mesh(mesh.vertices, mesh.faces[np.sort(first)])


def sionna_city(name="san_francisco"):
    """``[(mesh, object_to_world 3x4)]`` of a ``sionna-rt`` scene (module doc string)."""
    xml = _package_file("sionna-rt", f"sionna/rt/scenes/{name}/{name}.xml")
    files = re.findall(r'<string name="filename" value="([^"]+\.ply)"', xml.read_text())
    if not files:
        raise SceneUnavailable(f"`{xml.name}` lists no PLY meshes")
    shared = {}
    out = []
    for rel in files:
        mesh = load_ply(xml.parent / rel)
        if not len(mesh):
            continue
        lo = mesh.vertices.min(axis=0)
        local = Mesh(mesh.vertices - lo, mesh.faces)
        key = (local.vertices.tobytes(), local.faces.tobytes())
        local = shared.setdefault(key, local)
        out.append((local, np.hstack([np.eye(3), lo.astype(np.float64)[:, None]])))
    return out
