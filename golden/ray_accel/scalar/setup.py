"""Golden reference of the box path's ray setup (the RTL ``RaySetupUnit``): the OBB or instance
transform of the ray, then ``rcp(dir)``.

``ray_setup(tx)``: ``tx`` = ``origin[3]``, ``dir[3]`` and, with ``transforms``, ``obb_index``
(7 bits) and ``transform`` {``use_matrix``, ``matrix`` 3 x 4}. ``use_matrix`` applies the explicit
world-to-object matrix (:func:`.obb.transform_rows`, translation in column 3); otherwise an index
below the rotation count rotates the ray (:func:`.obb.obb_transform_ray`) and every other index
passes it through bit for bit. Returns ``{"ray": {"origin", "dir"}, "inv_dir"}`` with
``inv_dir = rcp(dir')`` per component (:func:`.box_test.ray_reciprocal`; the instruction has no
inverse-direction operand).
"""

from . import box_test, obb

__all__ = ["ray_setup"]


def ray_setup(tx, *, transforms=True, ftz=False):
    """Transformed ray and its reciprocal direction (see the module doc string)."""
    origin, direction = list(tx["origin"]), list(tx["dir"])
    if transforms:
        if tx["transform"]["use_matrix"]:
            o, d = obb.transform_rows(tx["transform"]["matrix"], origin, direction)
        else:
            o, d, _ = obb.obb_transform_ray(tx["obb_index"], origin, direction)
        origin, direction = [int(v) for v in o], [int(v) for v in d]
    inv = box_test.ray_reciprocal(direction, ftz=ftz)
    return {"ray": {"origin": origin, "dir": direction}, "inv_dir": [int(v) for v in inv]}
