"""BVH builder (binned SAH; BVH8 quantized nodes with optional OBBs, legacy BVH4, instancing),
OBJ/PLY meshes and procedural scenes, and traversal models that count the work per ray."""

from .builder import build_bvh, build_tlas
from .mesh import Mesh, load_mesh
from .traversal import traverse

__all__ = ["build_bvh", "build_tlas", "Mesh", "load_mesh", "traverse"]
